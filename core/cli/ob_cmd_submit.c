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
 * the rest. --input documents and batch lines must be JSON, and no job's inputs
 * past what a worker takes. The plan text is stored once in Redis whatever the
 * batch (ob_queue.h).
 *
 * A --batch file is streamed, read twice a line at a time: the first pass checks
 * every line and counts them (a bad line: said with its number, nothing queued);
 * then the batch's ids are taken at once (one INCRBY: they are consecutive, the
 * batch's record a range) and the second pass queues the lines PART_JOBS jobs at a
 * time, each part's replies awaited and its ids printed before the next is read.
 * Memory is a part's (a few MB), not the file's: a million lines once took 850 MB
 * of RSS, now under 20. Standard input or a FIFO, which cannot be read twice, is
 * copied to a temporary file as the first pass reads it. A regular file changed
 * between the passes (its size or time of change) is said before anything is
 * queued; one changed during the second (a line no longer JSON, fewer lines or
 * more) is said when it is seen, the parts before it queued: exit 1 either way. */
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

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
    "(`obelus wait --batch B` waits for them all). FILE is read twice, a line at a\n"
    "time (standard input or a FIFO copied to a temporary file): its size does not\n"
    "matter. --shard K splits a plan with \"instances\" into parts of K instances\n"
    "each, run as separate jobs; `obelus wait` gives back their outputs as one\n"
    "object, as a run would.\n"
    "Nothing is queued unless PLAN is valid: against the tools with --tools (the\n"
    "jobs then go only to workers with the same tool files); otherwise as far as\n"
    "can be told without them, the worker telling the rest.\n"
    "\n"
    "  --redis URL          redis://[:PASSWORD@]HOST[:PORT][/DB]\n"
    "  --queue NAME         the queue (default obelus)\n"
    "Exit 0: queued; 1: the --batch file changed while it was queued; 2: invalid\n"
    "plan, input or usage (nothing queued); 3: Redis unreachable (1, 3: some jobs\n"
    "may be queued).\n"
    "\n"
    "example:\n"
    "  obelus submit plans/weather/plan.json --tools plans/weather/tools \\\n"
    "      --redis redis://127.0.0.1:6379 --batch cities.jsonl\n";

/* A batch is queued this many jobs at a time (a sharded line's parts counted): a
   part's lines, jobs and commands are what memory holds. */
#define PART_JOBS 10000

typedef struct submit_cli {
  const ob_queue_batch *b;
  char why[600];
  char first[64], last[64]; /* the first and last ids printed */
  char batch[32];
  long long next;     /* the batch's next id (ob_queue_reserve_start) */
  long long batch_id;
  int finished;
} submit_cli;

/* The ids of the jobs that are not parts, printed once their submission answered. */
static void on_submitted(void *ud, char **ids, size_t n, const char *batch, const char *why) {
  submit_cli *s = ud;
  s->finished = 1;
  if (batch && !s->batch[0])
    snprintf(s->batch, sizeof s->batch, "%s", batch);
  if (why) {
    snprintf(s->why, sizeof s->why, "%s", why);
    return;
  }
  for (size_t i = 0; i < n; i++)
    if (s->b->jobs[i].parent < 0) {
      puts(ids[i]);
      if (!s->first[0])
        snprintf(s->first, sizeof s->first, "%s", ids[i]);
      snprintf(s->last, sizeof s->last, "%s", ids[i]);
    }
  fflush(stdout);
}

static void on_reserved(void *ud, long long first, long long batch, const char *why) {
  submit_cli *s = ud;
  s->finished = 1;
  if (why)
    snprintf(s->why, sizeof s->why, "%s", why);
  s->next = first;
  s->batch_id = batch;
}

/* --- the batch file ------------------------------------------------------------------------ */

typedef struct jsonl {
  const char *path;
  FILE *f;     /* the file (NULL once read, when spooled) */
  FILE *spool; /* a FIFO's or stdin's lines, as the first pass read them, for the second */
  FILE *in;    /* what is read: f, then spool */
  struct stat st; /* a regular file's, when opened */
  char *line;
  size_t cap, lineno;
} jsonl;

static int jsonl_open(jsonl *j, const char *path) {
  ob_error err;
  *j = (jsonl){.path = path};
  if (!(j->f = ob_file_open_read(path, &err))) {
    fprintf(stderr, "obelus submit: --batch: %s\n", err.msg);
    return -1;
  }
  if (fstat(fileno(j->f), &j->st) != 0 || !S_ISREG(j->st.st_mode)) { /* read once: kept */
    if (!(j->spool = tmpfile())) {
      fprintf(stderr, "obelus submit: --batch %s: a temporary copy: %s\n", path, strerror(errno));
      return -1;
    }
  }
  j->in = j->f;
  return 0;
}

static void jsonl_close(jsonl *j) {
  if (j->f && j->f != stdin)
    fclose(j->f);
  if (j->spool)
    fclose(j->spool);
  free(j->line);
}

/* For the second pass: from the start again (of the copy, when spooled). 0; 1 when a
   regular file's size or time of change is no longer what it was; -1 said. */
static int jsonl_rewind(jsonl *j) {
  if (j->spool) {
    if (j->f != stdin)
      fclose(j->f);
    j->f = NULL;
    j->in = j->spool;
  }
  j->lineno = 0;
  if (fseek(j->in, 0, SEEK_SET) != 0) {
    fprintf(stderr, "obelus submit: --batch %s: %s\n", j->path, strerror(errno));
    return -1;
  }
  struct stat now;
  return !j->spool && (fstat(fileno(j->in), &now) != 0 || now.st_size != j->st.st_size ||
                       now.st_mtim.tv_sec != j->st.st_mtim.tv_sec ||
                       now.st_mtim.tv_nsec != j->st.st_mtim.tv_nsec);
}

/* The next line that is not blank (spaces, tabs, CRs), parsed into *v: 1; 0 at the end;
   -1 for a line that is not JSON (err filled); -2 for a read or write error (said). */
static int jsonl_next(jsonl *j, ob_value **v, ob_error *err) {
  ssize_t len;
  while ((len = getline(&j->line, &j->cap, j->in)) >= 0) {
    j->lineno++;
    if (j->in == j->f && j->spool && fwrite(j->line, 1, (size_t)len, j->spool) != (size_t)len) {
      fprintf(stderr, "obelus submit: --batch %s: a temporary copy: %s\n", j->path, strerror(errno));
      return -2;
    }
    if (len && j->line[len - 1] == '\n')
      len--;
    size_t k = 0;
    while (k < (size_t)len && (j->line[k] == ' ' || j->line[k] == '\t' || j->line[k] == '\r'))
      k++;
    if (k == (size_t)len)
      continue;
    return (*v = ob_json_parse(j->line, (size_t)len, err)) ? 1 : -1;
  }
  if (ferror(j->in)) {
    fprintf(stderr, "obelus submit: --batch %s: %s\n", j->path, strerror(errno));
    return -2;
  }
  return 0;
}

/* The first pass: every line JSON and a job a worker takes (b's problem otherwise),
   counted into *n. OB_EXIT_OK, or OB_EXIT_USAGE said. */
static int batch_check(jsonl *j, ob_queue_batch *b, size_t *n) {
  ob_error err;
  ob_value *v;
  int got;
  *n = 0;
  while ((got = jsonl_next(j, &v, &err)) > 0) {
    int ok = ob_queue_batch_line_check(b, v, j->lineno) == OB_OK;
    ob_unref(v);
    if (!ok)
      return OB_EXIT_USAGE;
    ++*n;
  }
  if (got == -1)
    ob_eprintf("obelus submit: %s:%zu: %s\n", j->path, j->lineno, err.msg);
  return got ? OB_EXIT_USAGE : OB_EXIT_OK;
}

/* Runs the loop until the step under way calls back (or the connection fails). */
static void await(submit_cli *s, ob_cmd_redis *c, uv_loop_t *loop) {
  while (!s->finished && !c->failed)
    uv_run(loop, UV_RUN_ONCE);
  if (!s->finished && !s->why[0])
    snprintf(s->why, sizeof s->why, "the connection was lost");
}

/* The file changed after its lines were checked: said, OB_EXIT_FAIL. */
static int batch_changed(const jsonl *j, const char *what) {
  if (!j->lineno)
    ob_eprintf("obelus submit: %s: the file changed after its lines were checked (%s); "
               "nothing queued\n", j->path, what);
  else
    ob_eprintf("obelus submit: %s:%zu: the file changed as it was queued (%s); the jobs "
               "whose ids were printed are queued, no other\n", j->path, j->lineno, what);
  return OB_EXIT_FAIL;
}

/* The second pass: n lines (all checked) queued PART_JOBS jobs at a time, with the ids
   taken for them all, the first part writing the batch's record. */
static int batch_queue(jsonl *j, ob_queue_batch *b, size_t n, const char *q, ob_cmd_redis *c, uv_loop_t *loop, submit_cli *s) {
  int changed = jsonl_rewind(j);
  if (changed)
    return changed < 0 ? OB_EXIT_FAIL : batch_changed(j, "its size or time of change");
  if (ob_queue_reserve_start(c->r, q, n, 1, on_reserved, s) != OB_OK)
    snprintf(s->why, sizeof s->why, "the connection was lost"), s->finished = 1;
  await(s, c, loop);
  if (s->why[0])
    return OB_EXIT_UNAVAILABLE;
  size_t per = PART_JOBS / (1 + b->ntexts), left = n;
  long long first = s->next;
  snprintf(s->batch, sizeof s->batch, "%lld", s->batch_id);
  while (left) {
    ob_value *lines = ob_array(), *v;
    ob_error err;
    int got = 1;
    while (got > 0 && ob_array_len(lines) < (per ? per : 1) && ob_array_len(lines) < left)
      if ((got = jsonl_next(j, &v, &err)) > 0)
        lines = ob_array_push(lines, v);
    if (got > 0 && ob_array_len(lines) == left) { /* the last part: the file ends there */
      if ((got = jsonl_next(j, &v, &err)) > 0)
        ob_unref(v), got = -3;
      else if (got == 0)
        got = 1;
    }
    if (got <= 0) {
      ob_unref(lines);
      return got == -2 ? OB_EXIT_FAIL
             : batch_changed(j, got == 0 ? "it ends before its last line"
                                : got == -1 ? "a line that is no longer JSON"
                                            : "a line past its last");
    }
    ob_queue_batch_set_lines(b, lines);
    ob_unref(lines);
    ob_queue_submit_opts so = {.tools_id = b->tools_id[0] ? b->tools_id : NULL,
                               .tools = b->tools,
                               .first = s->next,
                               .batch_id = s->batch_id};
    if (left == n) /* the batch's record, before its first jobs */
      so.batch_last = first + (long long)n - 1;
    s->finished = 0;
    if (ob_queue_submit_with(c->r, q, b->jobs, b->njobs, &so, on_submitted, s) != OB_OK)
      snprintf(s->why, sizeof s->why, "the connection was lost"), s->finished = 1;
    await(s, c, loop);
    if (s->why[0])
      return OB_EXIT_UNAVAILABLE;
    s->next += (long long)b->nids;
    left -= b->nids;
  }
  return OB_EXIT_OK;
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
  ob_value *none = NULL;
  ob_queue_batch *b = NULL;
  jsonl file = {0};
  size_t nlines = 0;
  const char *q = o.queue ? o.queue : OB_QUEUE_DEFAULT;
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
  if (o.batch)
    none = ob_array(); /* the lines come from the file, a part at a time */
  b = ob_queue_batch_new(plan_text.data ? plan_text.data : "", plan_text.len, o.plan, e, o.inputs,
                         none, o.shard);
  s.b = b;
  if (!b->nproblems && o.batch && /* a line's problem is b's, said below */
      (jsonl_open(&file, o.batch) != 0 || batch_check(&file, b, &nlines) != OB_EXIT_OK) &&
      !b->nproblems)
    goto done;
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
  if ((rc = ob_cmd_redis_connect(&c, &loop, o.redis, q)) == OB_EXIT_OK) {
    if (!o.batch) {
      if (ob_queue_submit_start(c.r, q, b->jobs, b->njobs, b->tools_id[0] ? b->tools_id : NULL,
                                b->tools, 0, on_submitted, &s) != OB_OK)
        snprintf(s.why, sizeof s.why, "the connection was lost"), s.finished = 1;
      await(&s, &c, &loop);
      rc = s.why[0] ? OB_EXIT_UNAVAILABLE : OB_EXIT_OK;
    } else if (nlines) {
      rc = batch_queue(&file, b, nlines, q, &c, &loop, &s);
    }
    if (rc == OB_EXIT_UNAVAILABLE)
      fprintf(stderr, "obelus submit: %s: %s; some jobs may be queued (see obelus status)\n",
              o.redis, s.why);
    else if (rc == OB_EXIT_OK && o.batch && nlines) /* on stderr: stdout is the ids alone */
      fprintf(stderr, "obelus submit: batch %s: %zu job%s, %s to %s (obelus wait --batch %s%s%s)\n",
              s.batch, nlines, nlines == 1 ? "" : "s", s.first, s.last, s.batch,
              o.queue ? " --queue " : "", o.queue ? o.queue : "");
  }
  ob_cmd_redis_close(&c, &loop);
  uv_loop_close(&loop);
done:
  jsonl_close(&file);
  ob_queue_batch_free(b);
  ob_unref(none);
  ob_engine_free(e);
  ob_buf_free(&plan_text);
  ob_unref(o.inputs);
  return rc;
}
