/* ob_cmd_queue.c -- the commands that read a job queue in Redis: `obelus wait`,
 * `obelus status` and `obelus log --redis`, and the connection they (and
 * submit) share (ob_cmd_redis.h).
 *
 * wait is ob_queue_wait (blocking XREADs on the done stream) printing each job's
 * line: in the order given for ids on the command line alone, as each finishes for
 * --ids FILE and --batch ID (any number: the ids are an ob_queue_ids set, read
 * from the file a line at a time; a batch is a range of ids read from Redis). status and log are a few
 * commands one after another: each is sent and the loop run until it answers,
 * the answer turned into an ob_value (reply_value) so that the code reads
 * straight down. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/ob_cli.h"
#include "cli/ob_cli_opts.h"
#include "base/ob_error.h"
#include "cli/ob_cmd_redis.h"
#include "base/ob_mem.h"
#include "fleet/ob_queue.h"
#include "fleet/ob_queue_journal.h"
#include "fleet/ob_queue_memory.h"
#include "fleet/ob_queue_ids.h"
#include "fleet/ob_queue_job.h"
#include "fleet/ob_queue_wait.h"

/* --- the connection ------------------------------------------------------------------------- */

static void cmd_up(void *ud) {
  ob_cmd_redis *c = ud;
  if (c->up) {
    fprintf(stderr, "obelus %s: connected to %s again\n", c->cmd, ob_redis_url(c->r));
    if (c->again)
      c->again(c->ud);
  }
  c->up = 1;
}

static void cmd_down(void *ud, const char *why) {
  ob_cmd_redis *c = ud;
  if (!c->up) {
    c->failed = 1;
    fprintf(stderr, "obelus %s: cannot reach Redis at %s: %s\n", c->cmd, ob_redis_url(c->r), why);
    return;
  }
  fprintf(stderr, "obelus %s: lost Redis at %s (%s); reconnecting\n", c->cmd, ob_redis_url(c->r),
          why);
}

int ob_cmd_redis_connect(ob_cmd_redis *c, uv_loop_t *loop, const char *url, const char *q) {
  ob_error err;
  char *key = ob_queue_key(q, "seq", NULL);
  ob_redis_handlers h = {cmd_up, cmd_down, c, key};
  c->r = ob_redis_open(loop, url, &h, &err);
  free(key);
  if (!c->r) {
    fprintf(stderr, "obelus %s: --redis: %s\n", c->cmd, err.msg);
    return OB_EXIT_USAGE;
  }
  while (!c->up && !c->failed)
    uv_run(loop, UV_RUN_ONCE);
  return c->up ? OB_EXIT_OK : OB_EXIT_UNAVAILABLE;
}

void ob_cmd_redis_close(ob_cmd_redis *c, uv_loop_t *loop) {
  ob_redis_close(c->r);
  c->r = NULL;
  uv_run(loop, UV_RUN_NOWAIT);
  uv_run(loop, UV_RUN_NOWAIT);
}

/* --- one command at a time ------------------------------------------------------------------ */

typedef struct call_state {
  ob_value *v;
  int answered;
} call_state;

/* A reply as a value: strings, integers, arrays; nil null; an error {"error": text}. */
static ob_value *reply_value(const redisReply *rp) {
  switch (rp->type) {
  case REDIS_REPLY_STRING:
  case REDIS_REPLY_STATUS:
    return ob_string(rp->str, rp->len);
  case REDIS_REPLY_INTEGER:
    return ob_int(rp->integer);
  case REDIS_REPLY_ARRAY: {
    ob_value *a = ob_array();
    for (size_t i = 0; i < rp->elements; i++)
      a = ob_array_push(a, reply_value(rp->element[i]));
    return a;
  }
  case REDIS_REPLY_ERROR: {
    ob_value *o = ob_object();
    return ob_object_set(o, "error", 5, ob_string(rp->str, rp->len));
  }
  default:
    return ob_null();
  }
}

static void on_call(void *ud, redisReply *rp, const char *why) {
  call_state *s = ud;
  (void)why;
  s->answered = 1;
  s->v = rp ? reply_value(rp) : NULL;
}

/* Sends a command and runs the loop until it answers: its value, or NULL when the
 * connection went (said on stderr by the connection). */
static ob_value *call(ob_cmd_redis *c, uv_loop_t *loop, int argc, const char **argv) {
  call_state s = {0};
  if (ob_redis_send(c->r, on_call, &s, argc, argv, NULL) != OB_OK)
    return NULL;
  while (!s.answered)
    uv_run(loop, UV_RUN_ONCE);
  return s.v;
}

/* Sends a command whose reply cb reads itself (it sets *answered), and runs the loop until
 * it has: 1, or 0 when it could not be sent. */
static int call_read(ob_cmd_redis *c, uv_loop_t *loop, int argc, const char **argv,
                     ob_redis_cb cb, void *ud, const int *answered) {
  if (ob_redis_send(c->r, cb, ud, argc, argv, NULL) != OB_OK)
    return 0;
  while (!*answered)
    uv_run(loop, UV_RUN_ONCE);
  return 1;
}

static const char *vstr(const ob_value *v) {
  return v && ob_typeof(v) == OB_STRING ? ob_string_ptr(v) : NULL;
}

static long long vint(const ob_value *v, long long def) {
  if (v && ob_typeof(v) == OB_INT)
    return ob_int_value(v);
  const char *s = vstr(v);
  if (s && *s) {
    char *end;
    long long n = strtoll(s, &end, 10);
    if (!*end)
      return n;
  }
  return def;
}

/* A flat [field, value, ...] array's value for field. */
static const ob_value *field(const ob_value *flat, const char *name) {
  for (size_t i = 0; flat && ob_typeof(flat) == OB_ARRAY && i + 1 < ob_array_len(flat); i += 2) {
    const char *k = vstr(ob_array_get(flat, i));
    if (k && !strcmp(k, name))
      return ob_array_get(flat, i + 1);
  }
  return NULL;
}

static int is_error(const ob_value *v) {
  return v && ob_typeof(v) == OB_OBJECT && ob_object_get(v, "error", 5);
}

/* Options these commands share: --redis, --queue; the rest are each one's. */
typedef struct queue_args {
  const char *redis, *queue;
  const char **args; /* the words that are not options (malloc'd; argv's strings) */
  int nargs;
  size_t timeout_ms, at;
  int json, has_at;
  const char *ids, *batch; /* wait's --ids FILE, --batch ID */
} queue_args;

/* wait: its --timeout, --ids and --batch */
#define QA_WAIT 1
#define QA_JSON 2
#define QA_AT 4

static int parse_queue_args(int argc, char **argv, queue_args *a, const char *help, int what) {
  memset(a, 0, sizeof *a);
  a->queue = OB_QUEUE_DEFAULT;
  a->args = ob_xcalloc(argc > 0 ? (size_t)argc : 1, sizeof *a->args);
  ob_cli_args it;
  ob_cli_args_start(&it, argc, argv);
  int k;
  while ((k = ob_cli_args_next(&it)) > 0) {
    const char *s = it.opt, *val = it.val;
    if (!s) {
      a->args[a->nargs++] = val;
    } else if (!strcmp(s, "--help")) {
      fputs(help, stdout);
      return -1;
    } else if (!strcmp(s, "--redis")) {
      a->redis = val;
    } else if (!strcmp(s, "--queue")) {
      if (!ob_queue_name_ok(a->queue = val))
        return ob_cli_usage_error(argv[0], "--queue: a name of 1 to 64 letters, digits, _ . -");
    } else if ((what & QA_WAIT) && !strcmp(s, "--timeout")) {
      if (!ob_cli_parse_count(val, &a->timeout_ms) || !a->timeout_ms)
        return ob_cli_usage_error(argv[0], "--timeout needs milliseconds, 1 or more");
    } else if ((what & QA_WAIT) && !strcmp(s, "--ids")) {
      if (a->ids)
        return ob_cli_usage_error(argv[0], "--ids is given once (one file, or - for stdin)");
      a->ids = val;
    } else if ((what & QA_WAIT) && !strcmp(s, "--batch")) {
      uint64_t n;
      if (a->batch)
        return ob_cli_usage_error(argv[0], "--batch is given once");
      if (!ob_queue_ids_number(val, strlen(val), &n) || !n)
        return ob_cli_usage_error(argv[0], "--batch needs the batch id `obelus submit --batch` "
                                           "said (a number)");
      a->batch = val;
    } else if ((what & QA_JSON) && !strcmp(s, "--json")) {
      a->json = 1;
    } else if ((what & QA_AT) && !strcmp(s, "--at")) {
      if (!ob_cli_parse_count(val, &a->at))
        return ob_cli_usage_error(argv[0], "--at needs a message count (0 or more)");
      a->has_at = 1;
    } else if (!strcmp(s, "--format")) { /* log's, for a JOURNAL file */
      return ob_cli_usage_error(argv[0], "--format goes with a JOURNAL file, not --redis");
    } else {
      return ob_cli_args_unhandled(&it);
    }
  }
  if (k < 0)
    return OB_EXIT_USAGE;
  if (!a->redis)
    return ob_cli_usage_error(argv[0], "needs --redis URL (redis://HOST:PORT)");
  return 0;
}

/* --- wait ----------------------------------------------------------------------------------- */

static const char wait_help[] =
    "usage: obelus wait --redis URL JOB... [--timeout MS] [--queue NAME]\n"
    "       obelus wait --redis URL --ids FILE|- [--batch ID] [JOB]... [--timeout MS]\n"
    "       obelus wait --redis URL --batch ID [--timeout MS] [--queue NAME]\n"
    "\n"
    "Blocks until each job has finished and prints one JSON line per job:\n"
    "  {\"job\": ID, \"exit\": 0|1|2, \"output\": <the run's result>}\n"
    "(and \"error\" for a job that ended without a result, such as poison). JOB ids\n"
    "on the command line alone are printed in the order given, each as soon as it\n"
    "and those before it are known. With --ids FILE (ids separated by spaces or\n"
    "lines, as submit prints them; - reads standard input) or --batch ID (the jobs\n"
    "of `obelus submit --batch`), each job is printed once, as it finishes: those\n"
    "finished already first, then in the order they finish. Any number of jobs:\n"
    "memory is about a byte a job. A sharded job's output is its parts' outputs in\n"
    "one object. With --timeout, the jobs not finished by then are printed with\n"
    "\"exit\": null and their \"state\". Reading Redis blocks (no polling), and goes\n"
    "on through reconnections.\n"
    "\n"
    "  --ids FILE|-         the job ids to wait for, from a file or stdin\n"
    "  --batch ID           the jobs of a batch (submit --batch says its id)\n"
    "Exit 0: every job exited 0; 1: some job did not; 2: usage, a malformed id, or\n"
    "no such job or batch; 3: Redis unreachable; 4: the timeout passed first.\n"
    "\n"
    "example:\n"
    "  obelus submit plan.json --redis redis://127.0.0.1:6379 --batch in.jsonl > ids\n"
    "  obelus wait --redis redis://127.0.0.1:6379 --ids ids | jq -c .output\n";

typedef struct wait_cli {
  int worst, missing, done;
  char why[300];
} wait_cli;

static void on_result(void *ud, size_t i, const ob_queue_result *res) {
  wait_cli *wc = ud;
  (void)i;
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_add(&b, "{\"job\":", 7);
  ob_json_write_string(&b, res->job, strlen(res->job));
  if (!res->state) {
    ob_buf_addf(&b, ",\"exit\":null,\"error\":\"no such job\"}");
    wc->missing = 1;
  } else if (res->exit < 0) {
    ob_buf_addf(&b, ",\"exit\":null,\"state\":");
    ob_json_write_string(&b, res->state, strlen(res->state));
    ob_buf_addc(&b, '}');
  } else {
    ob_buf_addf(&b, ",\"exit\":%d,\"output\":%s", res->exit, res->output);
    if (res->error) {
      ob_buf_add(&b, ",\"error\":", 9);
      ob_json_write_string(&b, res->error, strlen(res->error));
    }
    ob_buf_addc(&b, '}');
    if (res->exit > wc->worst)
      wc->worst = res->exit;
  }
  ob_buf_addc(&b, '\n');
  fwrite(b.data, 1, b.len, stdout); /* flushed before the loop waits (ob_cmd_wait) */
  ob_buf_free(&b);
}

static void on_wait_done(void *ud, const char *why) {
  wait_cli *wc = ud;
  wc->done = 1;
  if (why)
    snprintf(wc->why, sizeof wc->why, "%s", why);
}

static void wait_again(void *ud) { ob_queue_wait_reconnected(ud); }

static int not_an_id(const char *where, const char *word, size_t len) {
  ob_eprintf("obelus wait: %s\"%.*s%s\" is not a job id (1 to %d letters, digits, _ . -)\n", where,
             (int)(len > 70 ? 70 : len), word, len > 70 ? "..." : "", OB_QUEUE_ID_MAX);
  return OB_EXIT_USAGE;
}

/* The ids of --ids (a file, or - for stdin), separated by white space, added to ids;
 * a word that is not a job id is named with its line (exit 2). */
static int read_ids(const char *path, ob_queue_ids *ids) {
  FILE *f = strcmp(path, "-") ? fopen(path, "r") : stdin;
  const char *name = strcmp(path, "-") ? path : "<stdin>";
  if (!f) {
    ob_eprintf("obelus wait: --ids %s: %s\n", path, strerror(errno));
    return OB_EXIT_USAGE;
  }
  char *line = NULL;
  size_t cap = 0, lineno = 0;
  ssize_t len;
  int rc = OB_EXIT_OK;
  while (rc == OB_EXIT_OK && (len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    for (size_t p = 0; p < (size_t)len;) {
      while (p < (size_t)len && (line[p] == ' ' || line[p] == '\t' || line[p] == '\r' ||
                                 line[p] == '\n' || line[p] == '\v' || line[p] == '\f'))
        p++;
      size_t w = p;
      while (w < (size_t)len && !(line[w] == ' ' || line[w] == '\t' || line[w] == '\r' ||
                                  line[w] == '\n' || line[w] == '\v' || line[w] == '\f'))
        w++;
      if (w == p)
        break;
      if (!ob_queue_id_ok(line + p, w - p)) {
        char where[600];
        snprintf(where, sizeof where, "--ids %s:%zu: ", name, lineno);
        rc = not_an_id(where, line + p, w - p);
        break;
      }
      ob_queue_ids_add(ids, line + p, w - p);
      p = w;
    }
  }
  if (rc == OB_EXIT_OK && ferror(f)) {
    ob_eprintf("obelus wait: --ids %s: %s\n", name, strerror(errno));
    rc = OB_EXIT_USAGE;
  }
  free(line);
  if (f != stdin)
    fclose(f);
  return rc;
}

/* --batch ID: its ids (a range, ob_queue.h), added to ids. */
static int batch_ids(ob_cmd_redis *c, uv_loop_t *loop, const queue_args *a, ob_queue_ids *ids) {
  char *k = ob_queue_key(a->queue, "batch", a->batch);
  ob_value *v = call(c, loop, 4, (const char *[]){"HMGET", k, "first", "last"});
  free(k);
  if (!v) {
    fprintf(stderr, "obelus wait: %s: the connection was lost\n", a->redis);
    return OB_EXIT_UNAVAILABLE;
  }
  int rc = OB_EXIT_OK;
  const char *first = ob_typeof(v) == OB_ARRAY && ob_array_len(v) == 2 ? vstr(ob_array_get(v, 0)) : NULL;
  const char *last = first ? vstr(ob_array_get(v, 1)) : NULL;
  uint64_t from, to;
  if (is_error(v) || (ob_typeof(v) == OB_ARRAY && ob_array_len(v) == 2 &&
                      ob_typeof(ob_array_get(v, 0)) == OB_NULL)) {
    ob_eprintf("obelus wait: --batch %s: no such batch in queue %s%s%s\n", a->batch, a->queue,
               is_error(v) ? ": " : "", is_error(v) ? vstr(ob_object_get(v, "error", 5)) : "");
    rc = OB_EXIT_USAGE;
  } else if (!first || !last || !ob_queue_ids_number(first, strlen(first), &from) ||
             !ob_queue_ids_number(last, strlen(last), &to) || from > to || !from) {
    ob_eprintf("obelus wait: --batch %s: its record in Redis (ob:{%s}:batch:%s) is broken: "
               "\"first\" and \"last\" are not job ids, first to last\n",
               a->batch, a->queue, a->batch);
    rc = OB_EXIT_USAGE;
  } else {
    ob_queue_ids_add_range(ids, from, to);
  }
  ob_unref(v);
  return rc;
}

int ob_cmd_wait(int argc, char **argv) {
  queue_args a;
  int rc = parse_queue_args(argc, argv, &a, wait_help, QA_WAIT);
  if (!rc && !a.nargs && !a.ids && !a.batch)
    rc = ob_cli_usage_error("wait", "needs the JOB ids that `obelus submit` printed, --ids FILE "
                                    "or --batch ID");
  for (int i = 0; !rc && i < a.nargs; i++)
    if (!ob_queue_id_ok(a.args[i], strlen(a.args[i])))
      rc = not_an_id("", a.args[i], strlen(a.args[i]));
  ob_queue_ids *ids = ob_queue_ids_new();
  for (int i = 0; !rc && i < a.nargs; i++)
    ob_queue_ids_add(ids, a.args[i], strlen(a.args[i]));
  if (!rc && a.ids)
    rc = read_ids(a.ids, ids);
  if (rc) {
    ob_queue_ids_free(ids);
    free(a.args);
    return rc < 0 ? OB_EXIT_OK : rc;
  }
  uv_loop_t loop;
  uv_loop_init(&loop);
  ob_cmd_redis c = {.cmd = "wait"};
  wait_cli wc = {0};
  if ((rc = ob_cmd_redis_connect(&c, &loop, a.redis, a.queue)) == OB_EXIT_OK && a.batch)
    rc = batch_ids(&c, &loop, &a, ids);
  if (rc == OB_EXIT_OK) {
    /* the command line alone: in the order given; else each job once, as it finishes */
    size_t *order = NULL, norder = 0;
    ob_queue_ids_seal(ids);
    if (!a.ids && !a.batch) {
      order = ob_xmalloc((size_t)a.nargs * sizeof *order);
      for (int i = 0; i < a.nargs; i++)
        order[norder++] = ob_queue_ids_find(ids, a.args[i], strlen(a.args[i]));
    }
    ob_queue_wait *w = ob_queue_wait_start(c.r, a.queue, ids, order, norder, a.timeout_ms,
                                           on_result, on_wait_done, &wc);
    ids = NULL; /* the wait's */
    free(order);
    c.again = wait_again;
    c.ud = w;
    while (!wc.done) {
      fflush(stdout); /* what is printed shows before the loop waits */
      uv_run(&loop, UV_RUN_ONCE);
    }
    fflush(stdout);
    ob_queue_wait_free(w);
    if (wc.missing)
      rc = OB_EXIT_USAGE;
    else if (!strcmp(wc.why, "timeout"))
      rc = OB_EXIT_TIMEOUT;
    else if (wc.why[0]) {
      fprintf(stderr, "obelus wait: %s: %s\n", a.redis, wc.why);
      rc = OB_EXIT_UNAVAILABLE;
    } else
      rc = wc.worst ? OB_EXIT_FAIL : OB_EXIT_OK;
  }
  ob_queue_ids_free(ids);
  ob_cmd_redis_close(&c, &loop);
  uv_loop_close(&loop);
  free(a.args);
  return rc;
}

/* --- status --------------------------------------------------------------------------------- */

static const char status_help[] =
    "usage: obelus status --redis URL [--queue NAME] [--json]\n"
    "\n"
    "How a queue stands: jobs queued (not yet taken), running on each worker, done,\n"
    "failed, taken over after a worker died, failed as poison; jobs finished in the\n"
    "last minute; the workers (seen when); and jobs that wait for tool files no\n"
    "live worker has. --json prints it as one JSON object.\n"
    "Exit 0; 2: usage; 3: Redis unreachable.\n";

/* A worker is live when it announced itself within three of its ticks
 * (ob_queue_worker_live). */
static int is_live(const ob_value *info, uint64_t now) { return ob_queue_worker_live(info, now); }

/* The queue's memory: Redis's whole (INFO memory's used_memory) and a finished job's, as
 * ob_queue_memory.h measures it: {used_bytes, sampled_jobs, ...}, or NULL when the
 * connection went. */
typedef struct memory_read {
  int answered, ok;
  ob_queue_memory m;
} memory_read;

static void on_memory(void *ud, redisReply *rp, const char *why) {
  memory_read *mr = ud;
  (void)why;
  mr->answered = 1;
  mr->ok = rp && ob_queue_memory_reply(rp, &mr->m) == 0;
}

static ob_value *status_memory(ob_cmd_redis *c, uv_loop_t *loop, const char *q) {
  ob_value *info = call(c, loop, 2, (const char *[]){"INFO", "memory"});
  if (!info)
    return NULL;
  long long used = ob_queue_memory_used(vstr(info));
  ob_unref(info);
  memory_read mr = {0};
  ob_queue_memory_args ma;
  ob_queue_memory_args_make(&ma, q);
  int sent = call_read(c, loop, 9, ma.argv, on_memory, &mr, &mr.answered);
  ob_queue_memory_args_free(&ma);
  if (!sent)
    return NULL;
  ob_value *o = ob_object();
  o = ob_object_set(o, "used_bytes", 10, used >= 0 ? ob_int(used) : ob_null());
  long long n = mr.ok ? mr.m.jobs : 0;
  o = ob_object_set(o, "sampled_jobs", 12, ob_int(n));
  if (n > 0) {
    o = ob_object_set(o, "job_hash_bytes", 14, ob_int((long long)(mr.m.hash_bytes / n + 0.5)));
    o = ob_object_set(o, "journal_bytes", 13, ob_int((long long)(mr.m.journal_bytes / n + 0.5)));
    o = ob_object_set(o, "per_job_bytes", 13, ob_int(ob_queue_memory_per_job(&mr.m)));
  }
  return o;
}

int ob_cmd_status(int argc, char **argv) {
  queue_args a;
  int rc = parse_queue_args(argc, argv, &a, status_help, QA_JSON);
  if (!rc && a.nargs)
    rc = ob_cli_usage_error("status", "unexpected argument \"%s\"", a.args[0]);
  free(a.args);
  if (rc)
    return rc < 0 ? OB_EXIT_OK : rc;
  uv_loop_t loop;
  uv_loop_init(&loop);
  ob_cmd_redis c = {.cmd = "status"};
  if ((rc = ob_cmd_redis_connect(&c, &loop, a.redis, a.queue)) != OB_EXIT_OK) {
    ob_cmd_redis_close(&c, &loop);
    uv_loop_close(&loop);
    return rc;
  }
  const char *q = a.queue;
  char *k_streams = ob_queue_key(q, "streams", NULL), *k_workers = ob_queue_key(q, "workers", NULL),
       *k_stats = ob_queue_key(q, "stats", NULL), *k_toolsets = ob_queue_key(q, "toolsets", NULL);
  uint64_t now = ob_queue_now_ms();
  ob_value *report = ob_object(), *streams = NULL, *workers = NULL, *stats = NULL,
           *toolsets = NULL, *rates = NULL;
  rc = OB_EXIT_UNAVAILABLE;
  int said = 0; /* the failure was said already */
  if (!(streams = call(&c, &loop, 2, (const char *[]){"SMEMBERS", k_streams})) ||
      !(workers = call(&c, &loop, 2, (const char *[]){"HGETALL", k_workers})) ||
      !(stats = call(&c, &loop, 2, (const char *[]){"HGETALL", k_stats})) ||
      !(toolsets = call(&c, &loop, 2, (const char *[]){"HGETALL", k_toolsets})))
    goto done;
  /* throughput: the per-second counters of the last 60 s */
  const char *margv[62];
  char *rkeys[60];
  margv[0] = "MGET";
  for (int s = 0; s < 60; s++) {
    char sec[32];
    snprintf(sec, sizeof sec, "%" PRIu64, now / 1000 - (uint64_t)s);
    margv[s + 1] = rkeys[s] = ob_queue_key(q, "rate", sec);
  }
  rates = call(&c, &loop, 61, margv);
  for (int s = 0; s < 60; s++)
    free(rkeys[s]);
  if (!rates)
    goto done;
  /* an error reply (a key of another type, a cluster's refusal): said, not read as data */
  const ob_value *bad = is_error(streams) ? streams : is_error(workers) ? workers
                        : is_error(stats) ? stats : is_error(toolsets) ? toolsets
                        : is_error(rates) ? rates : NULL;
  if (bad) {
    fprintf(stderr, "obelus status: %s: %s\n", a.redis, vstr(ob_object_get(bad, "error", 5)));
    said = 1;
    goto done;
  }
  long long last_minute = 0;
  for (size_t i = 0; i < ob_array_len(rates); i++)
    last_minute += vint(ob_array_get(rates, i), 0);

  /* the workers' entries, parsed once (null for one that is not an object), and the
   * tool files of the live ones */
  ob_value *infos = ob_array(), *live_tools = ob_object();
  for (size_t k = 0; ob_typeof(workers) == OB_ARRAY && k + 1 < ob_array_len(workers); k += 2) {
    const char *js = vstr(ob_array_get(workers, k + 1));
    ob_value *info = js ? ob_json_parse(js, strlen(js), NULL) : NULL;
    if (!info || ob_typeof(info) != OB_OBJECT) {
      ob_unref(info);
      info = ob_null();
    }
    const char *wt = ob_typeof(info) == OB_OBJECT ? vstr(ob_object_get(info, "tools_id", 8)) : NULL;
    if (wt && is_live(info, now))
      live_tools = ob_object_set(live_tools, wt, strlen(wt), ob_true());
    infos = ob_array_push(infos, info);
  }
  long long queued = 0, running = 0;
  ob_value *per_worker = ob_object(), *waiting = ob_array();
  for (size_t i = 0; ob_typeof(streams) == OB_ARRAY && i < ob_array_len(streams); i++) {
    const char *st = vstr(ob_array_get(streams, i));
    ob_value *groups = call(&c, &loop, 3, (const char *[]){"XINFO", "GROUPS", st});
    ob_value *pend = call(&c, &loop, 3, (const char *[]){"XPENDING", st, OB_QUEUE_GROUP});
    ob_value *len = call(&c, &loop, 2, (const char *[]){"XLEN", st});
    long long lag = 0;
    for (size_t g = 0; groups && ob_typeof(groups) == OB_ARRAY && g < ob_array_len(groups); g++) {
      const ob_value *gr = ob_array_get(groups, g);
      const char *name = vstr(field(gr, "name"));
      if (!name || strcmp(name, OB_QUEUE_GROUP))
        continue;
      const ob_value *l = field(gr, "lag");
      lag = l && ob_typeof(l) == OB_INT ? ob_int_value(l)
                                          : vint(len, 0) - vint(field(gr, "entries-read"), 0);
      if (lag < 0)
        lag = 0;
    }
    if (!groups || is_error(groups))
      lag = vint(len, 0); /* no group yet: nothing was ever taken */
    queued += lag;
    /* [count, min, max, [[consumer, count], ...]] */
    if (pend && ob_typeof(pend) == OB_ARRAY && ob_array_len(pend) == 4) {
      running += vint(ob_array_get(pend, 0), 0);
      const ob_value *cons = ob_array_get(pend, 3);
      for (size_t k = 0; ob_typeof(cons) == OB_ARRAY && k < ob_array_len(cons); k++) {
        const ob_value *pair = ob_array_get(cons, k);
        const char *who = vstr(ob_array_get(pair, 0));
        long long n = vint(ob_array_get(pair, 1), 0);
        const ob_value *had = ob_object_get(per_worker, who, strlen(who));
        per_worker = ob_object_set(per_worker, who, strlen(who), ob_int(n + (had ? ob_int_value(had) : 0)));
      }
    }
    /* a stream of jobs for tool files no live worker has */
    const char *tid = strrchr(st, ':');
    tid = tid && strlen(tid + 1) == 16 && strstr(st, ":jobs:") ? tid + 1 : NULL;
    if (tid && lag > 0 && !ob_object_get(live_tools, tid, strlen(tid))) {
      const char *names = vstr(field(toolsets, tid));
      ob_value *o = ob_object();
      o = ob_object_set(o, "tools_id", 8, ob_cstring(tid));
      o = ob_object_set(o, "jobs", 4, ob_int(lag));
      o = ob_object_set(o, "tools", 5, names ? ob_json_parse(names, strlen(names), NULL) : ob_null());
      waiting = ob_array_push(waiting, o);
    }
    ob_unref(groups);
    ob_unref(pend);
    ob_unref(len);
  }
  ob_value *wlist = ob_array();
  for (size_t k = 0; k < ob_array_len(infos); k++) {
    const char *name = vstr(ob_array_get(workers, 2 * k));
    ob_value *info = ob_ref(ob_array_get(infos, k));
    if (ob_typeof(info) != OB_OBJECT) {
      ob_unref(info);
      continue;
    }
    long long seen = vint(ob_object_get(info, "seen", 4), 0);
    const ob_value *pw = ob_object_get(per_worker, name, strlen(name));
    info = ob_object_set(info, "name", 4, ob_cstring(name));
    info = ob_object_set(info, "pending", 7, ob_int(pw ? ob_int_value(pw) : 0));
    info = ob_object_set(info, "live", 4, ob_bool(is_live(info, now)));
    info = ob_object_set(info, "seen_ms_ago", 11, ob_int((long long)now - seen));
    wlist = ob_array_push(wlist, info);
  }
  /* consumers holding jobs that are not (or no longer) in the workers list: dead ones */
  ob_object_iter it;
  ob_value *key, *val;
  ob_object_iter_init(&it, per_worker);
  while (ob_object_iter_next(&it, &key, &val)) {
    int listed = 0;
    for (size_t k = 0; k < ob_array_len(wlist); k++)
      listed |= !strcmp(vstr(ob_object_get(ob_array_get(wlist, k), "name", 4)), ob_string_ptr(key));
    if (!listed && ob_int_value(val) > 0) {
      ob_value *o = ob_object();
      o = ob_object_set(o, "name", 4, ob_ref(key));
      o = ob_object_set(o, "pending", 7, ob_ref(val));
      o = ob_object_set(o, "live", 4, ob_false());
      wlist = ob_array_push(wlist, o);
    }
  }
  report = ob_object_set(report, "queue", 5, ob_cstring(q));
  report = ob_object_set(report, "queued", 6, ob_int(queued));
  report = ob_object_set(report, "running", 7, ob_int(running));
  report = ob_object_set(report, "done", 4, ob_int(vint(field(stats, "done"), 0)));
  report = ob_object_set(report, "failed", 6, ob_int(vint(field(stats, "failed"), 0)));
  report = ob_object_set(report, "claimed", 7, ob_int(vint(field(stats, "claimed"), 0)));
  report = ob_object_set(report, "poisoned", 8, ob_int(vint(field(stats, "poisoned"), 0)));
  report = ob_object_set(report, "last_minute", 11, ob_int(last_minute));
  report = ob_object_set(report, "per_second", 10, ob_real((double)last_minute / 60.0));
  report = ob_object_set(report, "workers", 7, wlist);
  report = ob_object_set(report, "waiting_for_tools", 17, waiting);
  ob_value *memory = status_memory(&c, &loop, q);
  if (!memory)
    goto done;
  report = ob_object_set(report, "memory", 6, memory);
  ob_unref(per_worker);
  ob_unref(infos);
  ob_unref(live_tools);
  if (a.json) {
    char *text = ob_json_print(report, OB_JSON_COMPACT, NULL);
    puts(text);
    free(text);
  } else { /* names, hosts, tool ids come from Redis (anyone may have written them):
              the text is printed escaped, a terminal control as \x1b */
    char *txt = NULL;
    size_t tlen = 0;
    FILE *o = open_memstream(&txt, &tlen);
    if (!o) {
      fprintf(stderr, "obelus status: out of memory\n");
      rc = OB_EXIT_FAIL;
      goto done;
    }
    fprintf(o, "queue %s on %s\n", q, a.redis);
    fprintf(o, "  queued %lld, running %lld, done %lld, failed %lld, claimed after a crash %lld, "
           "poison %lld\n",
           queued, running, vint(field(stats, "done"), 0), vint(field(stats, "failed"), 0),
           vint(field(stats, "claimed"), 0), vint(field(stats, "poisoned"), 0));
    fprintf(o, "  finished in the last minute: %lld (%.1f a second)\n", last_minute,
           (double)last_minute / 60.0);
    long long used = vint(ob_object_get(memory, "used_bytes", 10), -1),
              sampled = vint(ob_object_get(memory, "sampled_jobs", 12), 0);
    if (used >= 0)
      fprintf(o, "  memory: Redis uses %.1f MB", (double)used / 1048576.0);
    if (used >= 0 && sampled > 0)
      fprintf(o, "; a finished job about %lld B (its hash %lld, its journal %lld; the last %lld "
                 "finished)", vint(ob_object_get(memory, "per_job_bytes", 13), 0),
              vint(ob_object_get(memory, "job_hash_bytes", 14), 0),
              vint(ob_object_get(memory, "journal_bytes", 13), 0), sampled);
    if (used >= 0)
      fputc('\n', o);
    fprintf(o, "  workers: %zu\n", ob_array_len(wlist));
    for (size_t k = 0; k < ob_array_len(wlist); k++) {
      const ob_value *wi = ob_array_get(wlist, k);
      const char *name = vstr(ob_object_get(wi, "name", 4));
      long long pend = vint(ob_object_get(wi, "pending", 7), 0);
      int live = ob_typeof(ob_object_get(wi, "live", 4)) == OB_TRUE;
      double ago = (double)vint(ob_object_get(wi, "seen_ms_ago", 11), 0) / 1000.0;
      if (ob_object_get(wi, "seen", 4) && live)
        fprintf(o, "    %s: running %lld of %lld (seen %.1f s ago), tools %s\n", name, pend,
               vint(ob_object_get(wi, "jobs", 4), 0), ago, vstr(ob_object_get(wi, "tools_id", 8)));
      else if (ob_object_get(wi, "seen", 4))
        fprintf(o, "    %s: silent for %.1f s, holding %lld (taken over after --claim-idle)\n", name,
               ago, pend);
      else
        fprintf(o, "    %s: holding %lld, gone (its jobs are taken over after --claim-idle)\n", name,
               pend);
    }
    for (size_t k = 0; k < ob_array_len(waiting); k++) {
      const ob_value *wt = ob_array_get(waiting, k);
      fprintf(o, "  %lld job%s wait for a worker with tool files %s", vint(ob_object_get(wt, "jobs", 4), 0),
             vint(ob_object_get(wt, "jobs", 4), 0) == 1 ? "" : "s",
             vstr(ob_object_get(wt, "tools_id", 8)));
      const ob_value *names = ob_object_get(wt, "tools", 5);
      for (size_t n = 0; names && ob_typeof(names) == OB_ARRAY && n < ob_array_len(names); n++)
        fprintf(o, "%s%s", n ? ", " : " (", vstr(ob_object_get(ob_array_get(names, n), "name", 4)));
      fprintf(o, "%s: no live worker has them\n",
             names && ob_typeof(names) == OB_ARRAY && ob_array_len(names) ? ")" : "");
    }
    fclose(o);
    ob_fputs_escaped(stdout, txt, tlen, OB_ESC_LINES);
    free(txt);
  }
  rc = OB_EXIT_OK;
done:
  if (rc != OB_EXIT_OK && !said)
    fprintf(stderr, "obelus status: %s: the connection was lost\n", a.redis);
  ob_unref(report);
  ob_unref(streams);
  ob_unref(workers);
  ob_unref(stats);
  ob_unref(toolsets);
  ob_unref(rates);
  free(k_streams);
  free(k_workers);
  free(k_stats);
  free(k_toolsets);
  ob_cmd_redis_close(&c, &loop);
  uv_loop_close(&loop);
  return rc;
}

/* --- log --redis ---------------------------------------------------------------------------- */

/* A job's journal read (ob_queue_journal.h): what the reply said, made into text. */
typedef struct journal_read {
  const char *job;
  int answered, kind;
  ob_buf text;
  char state[32];
  ob_error err;
} journal_read;

static void on_journal(void *ud, redisReply *rp, const char *why) {
  journal_read *jr = ud;
  (void)why;
  jr->answered = 1;
  jr->kind = rp ? ob_queue_journal_reply(rp, jr->job, &jr->text, jr->state, sizeof jr->state,
                                         &jr->err)
                : -1;
}

/* Writes job's journal to a temporary file and prints it with ob_cmd_log. */
static int log_one(ob_cmd_redis *c, uv_loop_t *loop, const queue_args *a, const char *job) {
  journal_read jr = {.job = job};
  ob_queue_journal_args ja;
  ob_queue_journal_args_make(&ja, a->queue, job);
  int sent = call_read(c, loop, 9, ja.argv, on_journal, &jr, &jr.answered);
  ob_queue_journal_args_free(&ja);
  if (!sent || jr.kind < 0) {
    fprintf(stderr, "obelus log: %s: the connection was lost\n", a->redis);
    return OB_EXIT_UNAVAILABLE;
  }
  if (jr.kind == OB_QJ_BAD) {
    ob_eprintf("obelus log: job %s in queue %s: %s\n", job, a->queue, jr.err.msg);
    ob_buf_free(&jr.text);
    return OB_EXIT_FAIL;
  }
  if (jr.kind == OB_QJ_GONE) {
    ob_eprintf("obelus log: job %s in queue %s has %s, and its journal is no longer kept "
               "(workers keep a finished job's journal for --keep-journals: an hour unless "
               "told)\n", job, a->queue, !strcmp(jr.state, "failed") ? "failed" : "finished");
    return OB_EXIT_FAIL;
  }
  if (jr.kind == OB_QJ_NONE) {
    /* a job that failed before it ran (a malformed entry, an invalid plan): why */
    char *jk = ob_queue_key(a->queue, "job", job);
    ob_value *st = call(c, loop, 5, (const char *[]){"HMGET", jk, "state", "error", "output"});
    free(jk);
    const ob_value *state = st && ob_typeof(st) == OB_ARRAY && ob_array_len(st) == 3
                                ? ob_array_get(st, 0) : NULL;
    const ob_value *why = state ? ob_array_get(st, 1) : NULL;
    /* a failure found before the run (an invalid plan, a plan gone) is its output: the
       plan's errors as a JSON list */
    if (state && ob_typeof(why) != OB_STRING && ob_typeof(state) == OB_STRING &&
        !strcmp(ob_string_ptr(state), "failed"))
      why = ob_array_get(st, 2);
    /* the state and the error are text anyone with Redis access may have written:
       printed escaped */
    if (why && ob_typeof(why) == OB_STRING && ob_typeof(state) == OB_STRING)
      ob_eprintf("obelus log: job %s has no journal in queue %s: it %s before it ran: %s\n",
                 job, a->queue, !strcmp(ob_string_ptr(state), "failed") ? "failed" : "ended",
                 ob_string_ptr(why));
    else
      ob_eprintf("obelus log: job %s has no journal in queue %s (not started, or no such "
                 "job)\n",
                 job, a->queue);
    ob_unref(st);
    return OB_EXIT_FAIL;
  }
  ob_value *text = ob_string(jr.text.data ? jr.text.data : "", jr.text.len);
  ob_buf_free(&jr.text);
  const char *tmp = getenv("TMPDIR");
  ob_buf path;
  ob_buf_init(&path);
  ob_buf_addf(&path, "%s/obelus-log-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  int fd = mkstemp(path.data);
  int rc = OB_EXIT_USAGE;
  if (fd < 0 || write(fd, ob_string_ptr(text), ob_string_len(text)) !=
                    (ssize_t)ob_string_len(text)) {
    fprintf(stderr, "obelus log: cannot write a temporary file\n");
  } else {
    char at[32];
    snprintf(at, sizeof at, "%zu", a->at);
    char *argv[] = {"log", path.data, "--at", at, NULL};
    fflush(stdout);
    rc = ob_cmd_log(a->has_at ? 4 : 2, argv);
  }
  if (fd >= 0) {
    close(fd);
    unlink(path.data);
  }
  ob_buf_free(&path);
  ob_unref(text);
  return rc;
}

int ob_cmd_log_redis(int argc, char **argv) {
  static const char help[] =
      "usage: obelus log --redis URL JOB [--queue NAME] [--at N]\n"
      "\n"
      "Prints a job's journal, kept in Redis by the worker that ran it, as `obelus\n"
      "log JOURNAL` does (a sharded job: each part's in turn).\n";
  queue_args a;
  int rc = parse_queue_args(argc, argv, &a, help, QA_AT);
  if (!rc && a.nargs != 1)
    rc = ob_cli_usage_error("log", "--redis needs one JOB id");
  if (rc) {
    free(a.args);
    return rc < 0 ? OB_EXIT_OK : rc;
  }
  uv_loop_t loop;
  uv_loop_init(&loop);
  ob_cmd_redis c = {.cmd = "log"};
  if ((rc = ob_cmd_redis_connect(&c, &loop, a.redis, a.queue)) == OB_EXIT_OK) {
    char *k = ob_queue_key(a.queue, "job", a.args[0]);
    ob_value *parts = call(&c, &loop, 3, (const char *[]){"HGET", k, "parts"});
    free(k);
    long long n = vint(parts, 0);
    ob_unref(parts);
    if (n <= 0) {
      rc = log_one(&c, &loop, &a, a.args[0]);
    } else {
      for (long long i = 1; i <= n && rc == OB_EXIT_OK; i++) {
        char id[128];
        snprintf(id, sizeof id, "%s.%lld", a.args[0], i);
        printf("%sjob %s\n", i > 1 ? "\n" : "", id);
        rc = log_one(&c, &loop, &a, id);
      }
    }
  }
  ob_cmd_redis_close(&c, &loop);
  uv_loop_close(&loop);
  free(a.args);
  return rc;
}
