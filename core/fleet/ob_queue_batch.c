/* ob_queue_batch.c -- a submission's jobs made from a plan (ob_queue_batch.h).
 *
 * The plan is parsed and made an ob_plan once: that checks its shape, references,
 * output paths and cycles; with an engine, ob_plan_check_tools adds the tools'
 * schemas, as `check` does. Inputs are checked as --input is, and each job's
 * (the given ones and its line's) against what a worker takes: its compact JSON's
 * length is the given's (printed once) plus the line's. A sharded plan's parts
 * are the plan with "instances" cut to K ids each (the "auto" list already
 * resolved from the context), printed once and shared by every batch line. The
 * jobs are made for the lines given, all at once or (ob_queue_batch_set_lines) a
 * part of a streamed batch at a time, each part's replacing the one before. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "plan/ob_plan.h"
#include "fleet/ob_queue_batch.h"
#include "fleet/ob_queue_job.h"
#include "engine/ob_run.h"

static void problem(ob_queue_batch *b, const char *text) {
  b->problems = ob_xrealloc(b->problems, (b->nproblems + 1) * sizeof *b->problems);
  b->problems[b->nproblems++] = ob_xstrdup(text);
}

ob_queue_batch *ob_queue_batch_new(const char *plan_text, size_t len, const char *name,
                                   ob_engine *e, const ob_value *inputs, const ob_value *lines,
                                   size_t shard) {
  ob_queue_batch *b = ob_xcalloc(1, sizeof *b);
  b->plan_text = ob_xstrndup(plan_text, len);
  b->plan_len = len;
  b->name = ob_xstrdup(name ? name : "plan");
  if (!ob_queue_plan_name_ok(b->name, strlen(b->name))) { /* what a worker would refuse */
    if (strlen(b->name) > OB_QUEUE_NAME_MAX)
      b->name[OB_QUEUE_NAME_MAX] = '\0';
    ob_queue_text_clean(b->name);
    if (!*b->name)
      b->name = (free(b->name), ob_xstrdup("plan"));
  }
  ob_error err;
  if (len > OB_QUEUE_PLAN_MAX) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s: %zu bytes; a queued plan is at most %zu MB", b->name, len,
             OB_QUEUE_PLAN_MAX >> 20);
    problem(b, msg);
    return b;
  }
  if (!(b->plan_value = ob_json_parse(plan_text, len, &err))) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s: %s", b->name, err.msg);
    problem(b, msg);
    return b;
  }
  ob_plan *p = b->plan = ob_plan_from_value(b->plan_value, b->name);
  if (e) {
    ob_plan_check_tools(p, &e->tools, ob_engine_has_latent(e));
    ob_value *files = ob_engine_tool_files(e);
    ob_queue_tools_id(files, b->tools_id);
    b->tools = ob_queue_tools_names(files);
    ob_unref(files);
  }
  b->given = ob_array();
  for (size_t i = 0; inputs && i < ob_array_len(inputs); i++)
    b->given = ob_array_push(b->given, ob_ref(ob_array_get(inputs, i)));
  ob_run_check_messages(p, b->given, "--input", 1);
  if (shard && !p->ninstances)
    ob_plan_error(p, NULL, "--shard needs a plan with \"instances\"");
  for (size_t i = 0; i < p->nerrors; i++)
    problem(b, p->errors[i]);
  if (b->nproblems)
    return b;

  size_t nparts = shard ? (p->ninstances + shard - 1) / shard : 0;
  if (nparts > OB_QUEUE_PARTS_MAX) {
    char msg[200];
    snprintf(msg, sizeof msg, "--shard %zu makes %zu parts; at most %d are allowed", shard, nparts,
             OB_QUEUE_PARTS_MAX);
    problem(b, msg);
    return b;
  }
  free(ob_json_print(b->given, OB_JSON_COMPACT, &b->given_size));
  if (!lines && ob_queue_batch_line_check(b, NULL, 1) != OB_OK)
    return b;
  for (size_t l = 0; lines && l < ob_array_len(lines); l++)
    if (ob_queue_batch_line_check(b, ob_array_get(lines, l), l + 1) != OB_OK)
      return b;
  b->texts = ob_xcalloc(nparts + 1, sizeof *b->texts);
  b->parts = ob_array();
  for (size_t k = 0; k < nparts; k++) {
    size_t from = k * shard, to = from + shard < p->ninstances ? from + shard : p->ninstances;
    ob_value *ids;
    b->texts[b->ntexts++] = ob_plan_part_text(b->plan_value, p, from, to, NULL, &ids);
    b->parts = ob_array_push(b->parts, ids);
  }
  ob_queue_batch_set_lines(b, lines);
  return b;
}

int ob_queue_batch_line_check(ob_queue_batch *b, const ob_value *line, size_t lineno) {
  /* the job's inputs, [given..., line], printed compact: the given's text, a comma
     between, the line's text */
  size_t n = b->given_size;
  if (line) {
    size_t ln = 0;
    free(ob_json_print(line, OB_JSON_COMPACT, &ln));
    n += ln + (ob_array_len(b->given) ? 1 : 0);
  }
  if (n <= OB_QUEUE_INPUTS_MAX) /* what a worker would refuse */
    return OB_OK;
  char msg[200];
  snprintf(msg, sizeof msg, "%s%zu: the inputs are %zu bytes of JSON; a job's are at most %zu MB",
           line ? "batch line " : "job ", lineno, n, OB_QUEUE_INPUTS_MAX >> 20);
  problem(b, msg);
  return OB_EINVAL;
}

/* The jobs made before, let go. */
static void jobs_free(ob_queue_batch *b) {
  for (size_t i = 0; i < b->ninputs; i++)
    ob_unref(b->inputs[i]);
  free(b->inputs);
  free(b->jobs);
  b->inputs = NULL;
  b->jobs = NULL;
  b->ninputs = b->njobs = b->nids = 0;
}

void ob_queue_batch_set_lines(ob_queue_batch *b, const ob_value *lines) {
  jobs_free(b);
  size_t nlines = lines ? ob_array_len(lines) : 1, nparts = b->ntexts;
  b->jobs = ob_xcalloc(nlines * (1 + nparts) + 1, sizeof *b->jobs);
  b->inputs = ob_xcalloc(nlines + 1, sizeof *b->inputs);
  for (size_t l = 0; l < nlines; l++) {
    ob_value *in = ob_array();
    for (size_t i = 0; i < ob_array_len(b->given); i++)
      in = ob_array_push(in, ob_ref(ob_array_get(b->given, i)));
    if (lines)
      in = ob_array_push(in, ob_ref(ob_array_get(lines, l)));
    b->inputs[b->ninputs++] = in;
    const ob_value *job_inputs = ob_array_len(in) ? in : NULL;
    b->nids++;
    if (!nparts) {
      b->jobs[b->njobs++] = (ob_queue_job){b->plan_text, b->plan_len, b->name, job_inputs, -1, 0, NULL};
      continue;
    }
    int parent = (int)b->njobs;
    b->jobs[b->njobs++] = (ob_queue_job){NULL, 0, b->name, NULL, -1, nparts, b->parts};
    for (size_t k = 0; k < nparts; k++)
      b->jobs[b->njobs++] = (ob_queue_job){b->texts[k], strlen(b->texts[k]), b->name, job_inputs,
                                           parent, 0, NULL};
  }
}

void ob_queue_batch_free(ob_queue_batch *b) {
  if (!b)
    return;
  for (size_t i = 0; i < b->nproblems; i++)
    free(b->problems[i]);
  free(b->problems);
  for (size_t i = 0; i < b->ntexts; i++)
    free(b->texts[i]);
  free(b->texts);
  jobs_free(b);
  ob_unref(b->given);
  ob_unref(b->parts);
  ob_unref(b->tools);
  ob_plan_free(b->plan);
  ob_unref(b->plan_value);
  free(b->plan_text);
  free(b->name);
  free(b);
}
