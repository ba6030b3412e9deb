/* ob_cmd_submit.c -- `obelus submit PLAN --redis URL`: validates a plan, then
 * queues it as one job, one job per line of --batch, or (--shard K) one job of
 * parts of K instances each, and prints the job ids, one a line, in order.
 *
 * What is checked before anything is queued (exit 2, nothing queued): with
 * --tools, all that `check` checks, and the tool files' identity goes with the
 * jobs (only workers with the same files take them); without, what needs no
 * tools (the shape, references, output paths, cycles), and the worker checks
 * the rest. --input documents and batch lines must be JSON. The plan text is
 * stored once in Redis whatever the batch (ob_queue.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ob_cli.h"
#include "ob_cmd_redis.h"
#include "ob_mem.h"
#include "ob_queue.h"
#include "ob_runner.h"

static const char submit_help[] =
    "usage: obelus submit PLAN --redis URL [--tools PATH]... [--input JSON|@FILE]...\n"
    "                     [--batch FILE.jsonl] [--shard K] [--queue NAME]\n"
    "\n"
    "Queues PLAN as a job for `obelus worker`s and prints its id. --batch queues one\n"
    "job per line of FILE (each line a JSON input document added after the --input\n"
    "ones) and prints one id per line, in order. --shard K splits a plan with\n"
    "\"instances\" into parts of K instances each, run as separate jobs; `obelus\n"
    "wait` gives back their outputs as one object, as a run would.\n"
    "Nothing is queued unless PLAN is valid: against the tools with --tools (the\n"
    "jobs then go only to workers with the same tool files); otherwise as far as\n"
    "can be told without them, the worker telling the rest.\n"
    "\n"
    "  --redis URL          redis://[:PASSWORD@]HOST[:PORT][/DB]\n"
    "  --queue NAME         the queue (default obelus)\n"
    "Exit 0: queued; 2: invalid plan, input or usage (nothing queued); 3: Redis\n"
    "unreachable.\n"
    "\n"
    "example:\n"
    "  obelus submit plans/weather/plan.json --tools plans/weather/tools \\\n"
    "      --redis redis://127.0.0.1:6379 --batch cities.jsonl\n";

typedef struct submit_cli {
  char **ids;
  size_t n;
  char why[600];
  int finished;
} submit_cli;

static void on_submitted(void *ud, char **ids, size_t n, const char *why) {
  submit_cli *s = ud;
  s->finished = 1;
  if (why) {
    snprintf(s->why, sizeof s->why, "%s", why);
    return;
  }
  s->ids = ob_xcalloc(n ? n : 1, sizeof *s->ids);
  s->n = n;
  for (size_t i = 0; i < n; i++)
    s->ids[i] = ob_xstrdup(ids[i]);
}

/* Every line of a JSON Lines file, parsed; NULL (said) on a bad line. */
static ob_value *read_batch(const char *path) {
  ob_buf b;
  ob_buf_init(&b);
  ob_error err;
  if (ob_read_file(path, &b, &err) != OB_OK) {
    fprintf(stderr, "obelus submit: --batch: %s\n", err.msg);
    return NULL;
  }
  ob_value *lines = ob_array();
  size_t lineno = 0;
  for (char *p = b.data ? b.data : ""; *p;) {
    char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    lineno++;
    size_t k = 0;
    while (k < len && (p[k] == ' ' || p[k] == '\t' || p[k] == '\r'))
      k++;
    if (k < len) {
      ob_value *v = ob_json_parse(p, len, &err);
      if (!v) {
        fprintf(stderr, "obelus submit: %s:%zu: %s\n", path, lineno, err.msg);
        ob_unref(lines);
        ob_buf_free(&b);
        return NULL;
      }
      lines = ob_array_push(lines, v);
    }
    p += len + (nl ? 1 : 0);
  }
  ob_buf_free(&b);
  return lines;
}

/* The plan with "instances" set to ids[from, to). */
static char *part_text(const ob_value *plan, char **ids, size_t from, size_t to, ob_value **list) {
  ob_value *inst = ob_array();
  for (size_t i = from; i < to; i++)
    inst = ob_array_push(inst, ob_cstring(ids[i]));
  ob_value *copy = ob_object();
  ob_object_iter it;
  ob_value *key, *val;
  ob_object_iter_init(&it, plan);
  while (ob_object_iter_next(&it, &key, &val))
    copy = ob_object_setv(copy, key, ob_ref(val));
  copy = ob_object_set(copy, "instances", 9, ob_ref(inst));
  char *text = ob_json_print(copy, OB_JSON_COMPACT, NULL);
  ob_unref(copy);
  *list = inst;
  return text;
}

int ob_cmd_submit(int argc, char **argv) {
  ob_cmd_options o;
  int rc = ob_cmd_options_parse(argc, argv, &o, submit_help);
  if (rc) {
    ob_unref(o.inputs);
    return rc < 0 ? OB_EXIT_OK : rc;
  }
  rc = OB_EXIT_USAGE;
  ob_error err;
  ob_engine *e = NULL;
  ob_plan *p = NULL;
  ob_value *batch = NULL, *tools = NULL, *pv = NULL;
  ob_queue_job *jobs = NULL;
  char **texts = NULL;
  size_t njobs = 0, ntexts = 0;
  ob_value **inputs = NULL;
  ob_buf plan_text;
  ob_buf_init(&plan_text);
  char tools_id[17] = "";
  ob_cmd_redis c = {.cmd = "submit"};
  submit_cli s = {0};

  if (ob_read_file(o.plan, &plan_text, &err) != OB_OK) {
    fprintf(stderr, "obelus submit: %s\n", err.msg);
    goto done;
  }
  pv = ob_json_parse(plan_text.data ? plan_text.data : "", plan_text.len, &err);
  if (!pv) {
    fprintf(stderr, "obelus submit: %s: %s\n", o.plan, err.msg);
    goto done;
  }
  p = ob_plan_from_value(pv, o.plan);
  if (!(e = ob_engine_new(NULL, &err))) {
    fprintf(stderr, "obelus submit: %s\n", err.msg);
    goto done;
  }
  if (o.ntools) {
    for (int i = 0; i < o.ntools; i++)
      if (ob_engine_load_tools(e, o.tools[i], &err) != OB_OK) {
        fprintf(stderr, "obelus submit: %s\n", err.msg);
        goto done;
      }
    for (int i = 0; i < o.nlatent; i++)
      if (ob_engine_load_script(e, o.latent[i], &err) != OB_OK) {
        fprintf(stderr, "obelus submit: %s\n", err.msg);
        goto done;
      }
    ob_plan_check_tools(p, &e->tools, ob_engine_has_latent(e));
    ob_value *files = ob_engine_tool_files(e);
    ob_queue_tools_id(files, tools_id);
    tools = ob_queue_tools_names(files);
    ob_unref(files);
  }
  ob_run_check_messages(p, o.inputs, "--input", 1);
  if (o.batch && !(batch = read_batch(o.batch)))
    goto done;
  if (o.shard && !p->ninstances)
    ob_plan_error(p, NULL, "--shard needs a plan with \"instances\"");
  for (size_t i = 0; i < p->nerrors; i++)
    fprintf(stderr, "%s\n", p->errors[i]);
  if (p->nerrors) {
    fprintf(stderr, "obelus submit: %zu problem%s, nothing queued\n", p->nerrors,
            p->nerrors == 1 ? "" : "s");
    goto done;
  }

  /* the jobs: one per batch line (or one), each a whole plan or its parts */
  size_t nlines = batch ? ob_array_len(batch) : 1;
  size_t nparts = o.shard ? (p->ninstances + o.shard - 1) / o.shard : 0;
  size_t per = 1 + nparts;
  jobs = ob_xcalloc(nlines * per + 1, sizeof *jobs);
  inputs = ob_xcalloc(nlines + 1, sizeof *inputs);
  texts = ob_xcalloc(nparts + 1, sizeof *texts);
  ob_value **part_ids = ob_xcalloc(nparts + 1, sizeof *part_ids);
  ob_value *plan_obj = ob_json_parse(plan_text.data, plan_text.len, NULL);
  for (size_t k = 0; k < nparts; k++) {
    size_t from = k * o.shard, to = from + o.shard < p->ninstances ? from + o.shard : p->ninstances;
    texts[ntexts++] = part_text(plan_obj, p->instances, from, to, &part_ids[k]);
  }
  ob_unref(plan_obj);
  ob_value *all_parts = ob_array();
  for (size_t k = 0; k < nparts; k++)
    all_parts = ob_array_push(all_parts, part_ids[k]);
  free(part_ids);
  for (size_t l = 0; l < nlines; l++) {
    ob_value *in = ob_ref(o.inputs);
    if (batch) {
      ob_value *copy = ob_array();
      for (size_t i = 0; i < ob_array_len(o.inputs); i++)
        copy = ob_array_push(copy, ob_ref(ob_array_get(o.inputs, i)));
      copy = ob_array_push(copy, ob_ref(ob_array_get(batch, l)));
      ob_unref(in);
      in = copy;
    }
    inputs[l] = in;
    const ob_value *job_inputs = ob_array_len(in) ? in : NULL;
    if (!o.shard) {
      jobs[njobs++] = (ob_queue_job){plan_text.data, plan_text.len, o.plan, job_inputs, -1, 0, NULL};
      continue;
    }
    int parent = (int)njobs;
    jobs[njobs++] = (ob_queue_job){NULL, 0, o.plan, NULL, -1, nparts, all_parts};
    for (size_t k = 0; k < nparts; k++)
      jobs[njobs++] = (ob_queue_job){texts[k], strlen(texts[k]), o.plan, job_inputs, parent, 0, NULL};
  }

  uv_loop_t loop;
  uv_loop_init(&loop);
  if ((rc = ob_cmd_redis_connect(&c, &loop, o.redis)) == OB_EXIT_OK) {
    if (ob_queue_submit_start(c.r, o.queue ? o.queue : OB_QUEUE_DEFAULT, jobs, njobs,
                              o.ntools ? tools_id : NULL, tools, on_submitted, &s) != OB_OK)
      snprintf(s.why, sizeof s.why, "the connection was lost"), s.finished = 1;
    while (!s.finished && !c.failed)
      uv_run(&loop, UV_RUN_ONCE);
    if (s.why[0] || !s.finished) {
      fprintf(stderr, "obelus submit: %s: %s; some jobs may be queued (see obelus status)\n",
              o.redis, s.why[0] ? s.why : "the connection was lost");
      rc = OB_EXIT_UNAVAILABLE;
    } else {
      for (size_t i = 0; i < s.n; i++)
        if (jobs[i].parent < 0)
          puts(s.ids[i]);
      rc = OB_EXIT_OK;
    }
  }
  ob_cmd_redis_close(&c, &loop);
  uv_loop_close(&loop);
  ob_unref(all_parts);
  for (size_t l = 0; l < nlines; l++)
    ob_unref(inputs[l]);
done:
  for (size_t i = 0; s.ids && i < s.n; i++)
    free(s.ids[i]);
  free(s.ids);
  for (size_t k = 0; k < ntexts; k++)
    free(texts[k]);
  free(texts);
  free(inputs);
  free(jobs);
  ob_unref(batch);
  ob_unref(tools);
  ob_plan_free(p);
  ob_unref(pv);
  ob_engine_free(e);
  ob_buf_free(&plan_text);
  ob_unref(o.inputs);
  return rc;
}
