/* ob_cmd_submit.c -- `obelus submit PLAN --redis URL`: validates a plan, then
 * queues it as one job, one job per line of --batch, or (--shard K) one job of
 * parts of K instances each, and prints the job ids, one a line, in order. A
 * --batch is also recorded as a batch (ob_queue.h), its id said on stderr
 * ("obelus submit: batch B: ..."), so that standard output stays the ids alone.
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

#include "cli/ob_cli.h"
#include "cli/ob_cmd_redis.h"
#include "base/ob_mem.h"
#include "fleet/ob_queue.h"
#include "fleet/ob_queue_batch.h"
#include "cli/ob_runner.h"

static const char submit_help[] =
    "usage: obelus submit PLAN --redis URL [--tools PATH]... [--input JSON|@FILE]...\n"
    "                     [--batch FILE.jsonl] [--shard K] [--queue NAME]\n"
    "\n"
    "Queues PLAN as a job for `obelus worker`s and prints its id. --batch queues one\n"
    "job per line of FILE (each line a JSON input document added after the --input\n"
    "ones) and prints one id per line, in order; it also records them as a batch,\n"
    "whose id it says on stderr: \"obelus submit: batch B: N jobs, FIRST to LAST\"\n"
    "(`obelus wait --batch B` waits for them all). --shard K splits a plan with\n"
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
  char batch[32];
  int finished;
} submit_cli;

static void on_submitted(void *ud, char **ids, size_t n, const char *batch, const char *why) {
  submit_cli *s = ud;
  s->finished = 1;
  snprintf(s->batch, sizeof s->batch, "%s", batch ? batch : "");
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
  ob_value *lines = NULL;
  ob_queue_batch *b = NULL;
  ob_buf plan_text;
  ob_buf_init(&plan_text);
  submit_cli s = {0};

  if (ob_read_file(o.plan, &plan_text, &err) != OB_OK) {
    fprintf(stderr, "obelus submit: %s\n", err.msg);
    goto done;
  }
  if (o.ntools) {
    if (!(e = ob_engine_new(NULL, &err))) {
      fprintf(stderr, "obelus submit: %s\n", err.msg);
      goto done;
    }
    ob_engine_set_note(e, ob_cli_note, NULL);
    if (ob_cmd_load(&o, e) != OB_EXIT_OK)
      goto done;
  }
  if (o.batch && !(lines = read_batch(o.batch)))
    goto done;
  b = ob_queue_batch_new(plan_text.data ? plan_text.data : "", plan_text.len, o.plan, e, o.inputs,
                         lines, o.shard);
  for (size_t i = 0; i < b->nproblems; i++)
    fprintf(stderr, "%s\n", b->problems[i]);
  if (b->nproblems) {
    fprintf(stderr, "obelus submit: %zu problem%s, nothing queued\n", b->nproblems,
            b->nproblems == 1 ? "" : "s");
    goto done;
  }

  uv_loop_t loop;
  uv_loop_init(&loop);
  ob_cmd_redis c = {.cmd = "submit"};
  if ((rc = ob_cmd_redis_connect(&c, &loop, o.redis, o.queue ? o.queue : OB_QUEUE_DEFAULT)) == OB_EXIT_OK) {
    if (ob_queue_submit_start(c.r, o.queue ? o.queue : OB_QUEUE_DEFAULT, b->jobs, b->njobs,
                              e ? b->tools_id : NULL, b->tools, o.batch != NULL, on_submitted,
                              &s) != OB_OK)
      snprintf(s.why, sizeof s.why, "the connection was lost"), s.finished = 1;
    while (!s.finished && !c.failed)
      uv_run(&loop, UV_RUN_ONCE);
    if (s.why[0] || !s.finished) {
      fprintf(stderr, "obelus submit: %s: %s; some jobs may be queued (see obelus status)\n",
              o.redis, s.why[0] ? s.why : "the connection was lost");
      rc = OB_EXIT_UNAVAILABLE;
    } else {
      const char *first = NULL, *last = NULL;
      for (size_t i = 0; i < s.n; i++)
        if (b->jobs[i].parent < 0) {
          puts(s.ids[i]);
          first = first ? first : s.ids[i];
          last = s.ids[i];
        }
      fflush(stdout);
      if (s.batch[0] && first) /* on stderr: stdout is the ids, one a line, for scripts */
        fprintf(stderr, "obelus submit: batch %s: %zu job%s, %s to %s (obelus wait --batch %s%s%s)\n",
                s.batch, b->nids, b->nids == 1 ? "" : "s", first, last, s.batch,
                o.queue ? " --queue " : "", o.queue ? o.queue : "");
      rc = OB_EXIT_OK;
    }
  }
  ob_cmd_redis_close(&c, &loop);
  uv_loop_close(&loop);
done:
  for (size_t i = 0; s.ids && i < s.n; i++)
    free(s.ids[i]);
  free(s.ids);
  ob_queue_batch_free(b);
  ob_unref(lines);
  ob_engine_free(e);
  ob_buf_free(&plan_text);
  ob_unref(o.inputs);
  return rc;
}
