/* ob_queue_batch.c -- a submission's jobs made from a plan (ob_queue_batch.h).
 *
 * The plan is parsed and made an ob_plan once: that checks its shape, references,
 * output paths and cycles; with an engine, ob_plan_check_tools adds the tools'
 * schemas, as `check` does. Inputs are checked as --input is. A sharded plan's
 * parts are the plan with "instances" cut to K ids each (the "auto" list already
 * resolved from the context), printed once and shared by every batch line. */
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
  ob_value *all = ob_array();
  for (size_t i = 0; inputs && i < ob_array_len(inputs); i++)
    all = ob_array_push(all, ob_ref(ob_array_get(inputs, i)));
  ob_run_check_messages(p, all, "--input", 1);
  ob_unref(all);
  if (shard && !p->ninstances)
    ob_plan_error(p, NULL, "--shard needs a plan with \"instances\"");
  for (size_t i = 0; i < p->nerrors; i++)
    problem(b, p->errors[i]);
  if (b->nproblems)
    return b;

  size_t nlines = lines ? ob_array_len(lines) : 1;
  size_t nparts = shard ? (p->ninstances + shard - 1) / shard : 0;
  if (nparts > OB_QUEUE_PARTS_MAX) {
    char msg[200];
    snprintf(msg, sizeof msg, "--shard %zu makes %zu parts; at most %d are allowed", shard, nparts,
             OB_QUEUE_PARTS_MAX);
    problem(b, msg);
    return b;
  }
  for (size_t l = 0; l < nlines; l++) { /* what a worker would refuse */
    ob_value *in = ob_array();
    for (size_t i = 0; inputs && i < ob_array_len(inputs); i++)
      in = ob_array_push(in, ob_ref(ob_array_get(inputs, i)));
    if (lines)
      in = ob_array_push(in, ob_ref(ob_array_get(lines, l)));
    char *text = ob_json_print(in, OB_JSON_COMPACT, NULL);
    size_t n = text ? strlen(text) : 0;
    free(text);
    ob_unref(in);
    if (n > OB_QUEUE_INPUTS_MAX) {
      char msg[200];
      snprintf(msg, sizeof msg, "%s%zu: the inputs are %zu bytes of JSON; a job's are at most %zu MB",
               lines ? "batch line " : "job ", l + 1, n, OB_QUEUE_INPUTS_MAX >> 20);
      problem(b, msg);
      return b;
    }
  }
  b->jobs = ob_xcalloc(nlines * (1 + nparts) + 1, sizeof *b->jobs);
  b->inputs = ob_xcalloc(nlines + 1, sizeof *b->inputs);
  b->texts = ob_xcalloc(nparts + 1, sizeof *b->texts);
  b->parts = ob_array();
  for (size_t k = 0; k < nparts; k++) {
    size_t from = k * shard, to = from + shard < p->ninstances ? from + shard : p->ninstances;
    ob_value *ids;
    b->texts[b->ntexts++] = ob_plan_part_text(b->plan_value, p, from, to, NULL, &ids);
    b->parts = ob_array_push(b->parts, ids);
  }
  for (size_t l = 0; l < nlines; l++) {
    ob_value *in = ob_array();
    for (size_t i = 0; inputs && i < ob_array_len(inputs); i++)
      in = ob_array_push(in, ob_ref(ob_array_get(inputs, i)));
    if (lines)
      in = ob_array_push(in, ob_ref(ob_array_get(lines, l)));
    b->inputs[b->ninputs++] = in;
    const ob_value *job_inputs = ob_array_len(in) ? in : NULL;
    b->nids++;
    if (!shard) {
      b->jobs[b->njobs++] = (ob_queue_job){b->plan_text, b->plan_len, b->name, job_inputs, -1, 0, NULL};
      continue;
    }
    int parent = (int)b->njobs;
    b->jobs[b->njobs++] = (ob_queue_job){NULL, 0, b->name, NULL, -1, nparts, b->parts};
    for (size_t k = 0; k < nparts; k++)
      b->jobs[b->njobs++] = (ob_queue_job){b->texts[k], strlen(b->texts[k]), b->name, job_inputs,
                                           parent, 0, NULL};
  }
  return b;
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
  for (size_t i = 0; i < b->ninputs; i++)
    ob_unref(b->inputs[i]);
  free(b->inputs);
  free(b->jobs);
  ob_unref(b->parts);
  ob_unref(b->tools);
  ob_plan_free(b->plan);
  ob_unref(b->plan_value);
  free(b->plan_text);
  free(b->name);
  free(b);
}
