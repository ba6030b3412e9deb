/* ob_cmd_run.c -- `obelus run` and `obelus check`: load tools and a plan, validate
 * everything, and (run) execute it on a libuv loop, printing the final output.
 * On a terminal, run and loop keep a live progress line at the bottom of stderr. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <lauxlib.h>

#include "ob_cli.h"
#include "ob_lua.h"
#include "ob_mem.h"
#include "ob_engine.h"
#include "ob_resume.h"
#include "ob_run.h"
#include "ob_wal.h"

static const char run_help[] =
    "usage: obelus run PLAN [--tools PATH]... [--input JSON|@FILE]... [--journal FILE]\n"
    "                  [--events FILE|-] [--concurrency N] [--drain-timeout MS] [--latent FILE]\n"
    "                  [--max-depth N] [--plans-root DIR] [--approver FILE] [--approve]\n"
    "                  [--call-timeout MS] [--fsync never|batch|always] [--max-memory MB]\n"
    "                  [--max-output KB] [--max-calls N] [--max-slice MS]\n"
    "\n"
    "Validates PLAN (a file, or - for standard input) against the tools, then\n"
    "runs every call as soon as its inputs exist, concurrently, and prints the\n"
    "final output as JSON on stdout.\n"
    "Exit 0: every awaited call done or skipped; 1: some call failed; 2: invalid\n"
    "plan, tool file or usage (nothing ran, stdout empty, no journal).\n"
    "\n"
    "  --tools PATH        a tool file (.lua) or a folder of them; repeatable\n"
    "  --input JSON|@FILE  adds {\"type\":\"data\",\"kind\":\"input\",\"data\":JSON}; repeatable\n"
    "  --journal FILE      the log as JSON Lines, written as it grows\n"
    "  --fsync LEVEL       how durable the journal is: never, batch (default: on disk\n"
    "                      within 50 ms) or always (a result on disk before its readers)\n"
    "  --events FILE|-     scheduler events as JSON Lines (- for stderr)\n"
    "  --concurrency N     at most N calls running at once (default: unlimited)\n"
    "  --drain-timeout MS  how long to wait for fire-and-forget calls (default 5000)\n"
    "  --call-timeout MS   a _timeout for every call that has none (per attempt)\n"
    "  --latent FILE       a Lua file that sets the latent handler (obelus.set_latent)\n"
    "  --max-depth N       how deep plans may delegate to plans (_delegate; default 16)\n"
    "  --max-memory MB     the most Lua memory tools may hold; the call that passes it fails\n"
    "  --max-output KB     the largest message a call may write; a larger result fails it\n"
    "  --max-calls N       the most calls in all: instances, delegated plans, loop steps\n"
    "  --max-slice MS      how long a tool may run without yielding (default 30000)\n"
    "  --plans-root DIR    the folder every _delegate path must lead into (default:\n"
    "                      PLAN's folder; the current directory for -)\n"
    "  --approver FILE     a Lua file that sets an approver (obelus.set_approver)\n"
    "  --approve           ask on the terminal before each call starts: y, n or e (edit)\n"
    "\n"
    "examples:\n"
    "  obelus run plans/user-status/plan.json --tools plans/user-status/tools\n"
    "  obelus run plan.json --tools tools/ --input '{\"city\":\"Oslo\"}' --journal run.jsonl\n";

static const char check_help[] =
    "usage: obelus check PLAN [--tools PATH]... [--latent FILE] [--plans-root DIR]\n"
    "\n"
    "Validates PLAN without running anything: its shape, every call against its\n"
    "tool's schema, every reference and output path, the dependency graph\n"
    "(cycles are named), and every plan it delegates to, which must lie inside\n"
    "the plans root (--plans-root DIR; default: PLAN's folder). Prints every\n"
    "problem as `file: call <id> (<tool>): <what>`. Exit 0 when valid, 2 otherwise.\n"
    "\n"
    "example:\n"
    "  obelus check plans/weather/plan.json --tools plans/weather/tools\n";

typedef struct progress progress;

typedef struct options {
  const char *cmd, *plan, *journal, *events, *planner;
  const char *plans_root; /* --plans-root as given, or NULL */
  char *root;             /* the plans root resolved (plan_root), or NULL before */
  size_t max_steps;
  const char *tools[64], *latent[16];
  int ntools, nlatent;
  ob_value *inputs; /* array */
  size_t concurrency, drain_ms, call_timeout_ms;
  size_t max_memory_mb, max_output_kb, max_calls; /* limits (0: none) */
  size_t max_slice_ms; /* the watchdog's (0: its default) */
  int max_depth;
  int approve, force;
  ob_fsync fsync;  /* the journal's durability (--fsync) */
  progress *pg; /* the progress line, or NULL (not a terminal, --events -, --approve) */
} options;

/* --- the progress line -------------------------------------------------------- *
 *
 * "done 12 · running 3 · waiting 5 · skipped 1 · failed 0 · 1.2s", kept as the
 * last line of stderr while calls run, when stderr is a terminal. Anything
 * else written to the terminal must erase it first, and that is written from
 * many places: the scheduler's failure notes, Lua tracebacks, tools using
 * io.stderr or print(). So for the length of the command the stdio streams
 * stderr (and stdout, when it is a terminal too) are replaced by streams
 * (glibc's fopencookie; glibc documents stdin/stdout/stderr as assignable
 * variables) whose every write erases the line first. They are installed
 * before the engine exists, so that Lua's io library takes them too, and put
 * back after it is freed. The line is redrawn on scheduler events at most ten
 * times a second, by a 100 ms timer (unref'd: it never keeps the loop alive)
 * for the elapsed time, always on run_done, and never after a partial line
 * someone else wrote (an answer may be awaited there). */

typedef struct pstream {
  progress *pg;
  int fd;
} pstream;

struct progress {
  FILE *real_err, *real_out; /* the streams replaced (real_out NULL: stdout kept) */
  FILE *err, *out;           /* their stand-ins */
  pstream err_side, out_side;
  int shown;                 /* the line is on the screen */
  int at_line_start;         /* the last byte anyone wrote ended a line */
  int color;
  uv_timer_t timer;
  int timer_open;
  uint64_t t0, last_draw;    /* uv_hrtime(), ns */
  const ob_run *run;         /* the run drawn, or NULL between runs */
  size_t ncalls;
  size_t base[6];            /* by ob_call_state: the counts of loop steps already run */
};

static int write_all(int fd, const char *s, size_t n) {
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

static void progress_erase(progress *pg) {
  if (pg && pg->shown) {
    write_all(STDERR_FILENO, "\r\033[K", 4);
    pg->shown = 0;
  }
}

static ssize_t pstream_write(void *cookie, const char *buf, size_t size) {
  pstream *ps = cookie;
  if (!size)
    return 0;
  progress_erase(ps->pg);
  if (write_all(ps->fd, buf, size) < 0)
    return -1;
  ps->pg->at_line_start = buf[size - 1] == '\n';
  return (ssize_t)size;
}

static FILE *pstream_open(pstream *ps, progress *pg, int fd, int mode) {
  cookie_io_functions_t io = {.write = pstream_write};
  ps->pg = pg;
  ps->fd = fd;
  FILE *f = fopencookie(ps, "w", io);
  if (f)
    setvbuf(f, NULL, mode, BUFSIZ);
  return f;
}

/* The progress line, when stderr is a terminal that can erase a line and
 * nothing else needs it (--events -, --approve asking there). */
static progress *progress_install(const options *o) {
  const char *term = getenv("TERM"), *nc = getenv("NO_COLOR");
  if (!isatty(STDERR_FILENO) || (term && !strcmp(term, "dumb")) || o->approve ||
      (o->events && !strcmp(o->events, "-")))
    return NULL;
  progress *pg = calloc(1, sizeof *pg);
  if (!pg)
    abort();
  pg->at_line_start = 1;
  pg->color = !(nc && *nc);
  fflush(stderr);
  fflush(stdout);
  if (!(pg->err = pstream_open(&pg->err_side, pg, STDERR_FILENO, _IONBF))) {
    free(pg);
    return NULL;
  }
  pg->real_err = stderr;
  stderr = pg->err;
  if (isatty(STDOUT_FILENO) && (pg->out = pstream_open(&pg->out_side, pg, STDOUT_FILENO, _IOLBF))) {
    pg->real_out = stdout;
    stdout = pg->out;
  }
  return pg;
}

/* Puts the real streams back (after the engine, which holds them in Lua, is freed). */
static void progress_remove(progress *pg) {
  if (!pg)
    return;
  progress_erase(pg);
  if (pg->real_out) {
    fflush(pg->out);
    stdout = pg->real_out;
    fclose(pg->out);
  }
  fflush(pg->err);
  stderr = pg->real_err;
  fclose(pg->err);
  free(pg);
}

static void progress_draw(progress *pg) {
  if (!pg->run || !pg->at_line_start)
    return;
  size_t n[6];
  memcpy(n, pg->base, sizeof n);
  for (size_t i = 0; i < pg->ncalls; i++)
    n[ob_run_call_state(pg->run, i)]++;
  uint64_t now = uv_hrtime();
  const char *red = pg->color && n[OB_CALL_FAILED] ? "\033[31m" : "";
  const char *off = *red ? "\033[0m" : "";
  char line[256];
  int len = snprintf(line, sizeof line,
                     "\rdone %zu \xC2\xB7 running %zu \xC2\xB7 waiting %zu \xC2\xB7 skipped %zu "
                     "\xC2\xB7 %sfailed %zu%s \xC2\xB7 %.1fs",
                     n[OB_CALL_DONE], n[OB_CALL_RUNNING], n[OB_CALL_WAITING] + n[OB_CALL_READY],
                     n[OB_CALL_SKIPPED], red, n[OB_CALL_FAILED], off,
                     (double)(now - pg->t0) / 1e9);
  if (len < 0 || (size_t)len >= sizeof line)
    return;
  /* a line wider than the terminal would wrap, and \r would not reach its start */
  struct winsize ws;
  size_t cols = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col ? ws.ws_col : 80;
  size_t shown = 0, cut = 0;
  for (size_t i = 1; i < (size_t)len; i++) {
    if (line[i] == '\033') { /* an SGR sequence takes no column */
      while (i < (size_t)len && line[i] != 'm')
        i++;
      continue;
    }
    if (((unsigned char)line[i] & 0xC0) != 0x80 && ++shown == cols) {
      cut = i;
      break;
    }
  }
  if (cut)
    len = (int)cut;
  write_all(STDERR_FILENO, line, (size_t)len);
  write_all(STDERR_FILENO, "\033[K", 3);
  if (cut && *off)
    write_all(STDERR_FILENO, off, strlen(off));
  pg->shown = 1;
  pg->last_draw = now;
}

static void progress_tick(uv_timer_t *t) { progress_draw(t->data); }

/* On a scheduler event: at most ten draws a second, but always the last. */
static void progress_event(progress *pg, const ob_event *ev) {
  if (ev->type == OB_EV_RUN_DONE || uv_hrtime() - pg->last_draw >= 100000000u)
    progress_draw(pg);
}

static void progress_start(progress *pg, uv_loop_t *loop) {
  pg->t0 = uv_hrtime();
  uv_timer_init(loop, &pg->timer);
  pg->timer.data = pg;
  uv_timer_start(&pg->timer, progress_tick, 100, 100);
  uv_unref((uv_handle_t *)&pg->timer);
  pg->timer_open = 1;
}

/* A run ends: its counts join the base (loop runs several), the line goes. */
static void progress_end_run(progress *pg) {
  for (size_t i = 0; pg->run && i < pg->ncalls; i++)
    pg->base[ob_run_call_state(pg->run, i)]++;
  pg->base[OB_CALL_RUNNING] = pg->base[OB_CALL_WAITING] = pg->base[OB_CALL_READY] = 0;
  pg->run = NULL;
  progress_erase(pg);
}

static int parse_args(int argc, char **argv, options *o, const char *help) {
  memset(o, 0, sizeof *o);
  o->cmd = argv[0];
  o->drain_ms = 5000;
  o->fsync = OB_FSYNC_BATCH;
  o->max_steps = 10;
  o->inputs = ob_array();
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(help, stdout);
      return -1;
    } else if (!strcmp(a, "--tools") && val) {
      if (o->ntools == 64)
        return ob_cli_usage_error(o->cmd, "too many --tools");
      o->tools[o->ntools++] = argv[++i];
    } else if (!strcmp(a, "--force") && !strcmp(o->cmd, "resume")) {
      o->force = 1;
    } else if (!strcmp(a, "--approve")) {
      o->approve = 1;
    } else if ((!strcmp(a, "--latent") || !strcmp(a, "--approver")) && val) {
      if (o->nlatent == 16)
        return ob_cli_usage_error(o->cmd, "too many --latent and --approver files");
      o->latent[o->nlatent++] = argv[++i];
    } else if (!strcmp(a, "--journal") && val) {
      o->journal = argv[++i];
    } else if (!strcmp(a, "--fsync") && val) {
      if (ob_fsync_parse(argv[++i], &o->fsync) != OB_OK)
        return ob_cli_usage_error(o->cmd, "--fsync is never, batch or always, not \"%s\"", argv[i]);
    } else if (!strcmp(a, "--events") && val) {
      o->events = argv[++i];
    } else if (!strcmp(a, "--concurrency") && val) {
      if (!ob_cli_parse_count(argv[++i], &o->concurrency) || !o->concurrency)
        return ob_cli_usage_error(o->cmd, "--concurrency needs a number of calls, 1 or more");
    } else if (!strcmp(a, "--planner") && val && !strcmp(o->cmd, "loop")) {
      o->planner = argv[++i];
    } else if (!strcmp(a, "--max-steps") && val && !strcmp(o->cmd, "loop")) {
      if (!ob_cli_parse_count(argv[++i], &o->max_steps) || !o->max_steps || o->max_steps > 100000)
        return ob_cli_usage_error(o->cmd, "--max-steps needs a number from 1 to 100000");
    } else if (!strcmp(a, "--max-depth") && val) {
      size_t d;
      if (!ob_cli_parse_count(argv[++i], &d) || d < 1 || d > 10000)
        return ob_cli_usage_error(o->cmd, "--max-depth needs a number from 1 to 10000");
      o->max_depth = (int)d;
    } else if (!strcmp(a, "--plans-root") && val) {
      o->plans_root = argv[++i];
    } else if (!strcmp(a, "--call-timeout") && val) {
      if (!ob_cli_parse_count(argv[++i], &o->call_timeout_ms) || !o->call_timeout_ms ||
          o->call_timeout_ms > 2147483647u)
        return ob_cli_usage_error(o->cmd, "--call-timeout needs milliseconds, 1 or more");
    } else if (!strcmp(a, "--max-memory") && val) {
      if (!ob_cli_parse_count(argv[++i], &o->max_memory_mb) || !o->max_memory_mb ||
          o->max_memory_mb > 1048576)
        return ob_cli_usage_error(o->cmd, "--max-memory needs megabytes, from 1 to 1048576");
    } else if (!strcmp(a, "--max-output") && val) {
      if (!ob_cli_parse_count(argv[++i], &o->max_output_kb) || !o->max_output_kb ||
          o->max_output_kb > 1073741824)
        return ob_cli_usage_error(o->cmd, "--max-output needs kilobytes, from 1 to 1073741824");
    } else if (!strcmp(a, "--max-calls") && val) {
      if (!ob_cli_parse_count(argv[++i], &o->max_calls) || !o->max_calls)
        return ob_cli_usage_error(o->cmd, "--max-calls needs a number of calls, 1 or more");
    } else if (!strcmp(a, "--max-slice") && val) {
      if (!ob_cli_parse_count(argv[++i], &o->max_slice_ms) || o->max_slice_ms < 10 ||
          o->max_slice_ms > 86400000)
        return ob_cli_usage_error(o->cmd, "--max-slice needs milliseconds, from 10 to 86400000");
    } else if (!strcmp(a, "--drain-timeout") && val) {
      if (!ob_cli_parse_count(argv[++i], &o->drain_ms))
        return ob_cli_usage_error(o->cmd, "--drain-timeout needs milliseconds");
    } else if (!strcmp(a, "--input") && val) {
      ob_error err;
      const char *in = argv[++i];
      ob_value *v = in[0] == '@' ? ob_json_parse_file(in + 1, &err)
                                 : ob_json_parse(in, strlen(in), &err);
      if (!v)
        return ob_cli_usage_error(o->cmd, "--input: %s", err.msg);
      o->inputs = ob_array_push(o->inputs, v);
    } else if (a[0] == '-' && a[1] == '-') {
      return ob_cli_usage_error(o->cmd, val || strcmp(a, "--help") ? "unknown option %s, or it "
                                                                     "lacks its value"
                                                                   : "%s",
                                a);
    } else if (!o->plan) {
      o->plan = a;
    } else {
      return ob_cli_usage_error(o->cmd, "unexpected argument \"%s\"", a);
    }
  }
  if (!o->plan)
    return ob_cli_usage_error(o->cmd, "needs a PLAN file");
  if (!strcmp(o->cmd, "loop") && !o->planner)
    return ob_cli_usage_error(o->cmd, "needs --planner FILE.lua");
  return 0;
}

/* The plans root (--plans-root, or PLAN's folder) as a real path in o->root:
 * OB_EXIT_OK, or 2 said on stderr. */
static int plans_root(options *o) {
  char *dir = o->plans_root ? NULL : ob_plan_default_root(o->plan);
  ob_error err;
  o->root = ob_plans_root(o->plans_root ? o->plans_root : dir, &err);
  free(dir);
  if (o->root)
    return OB_EXIT_OK;
  fprintf(stderr, "obelus %s: %s%s\n", o->cmd, err.msg,
          o->plans_root ? "" : " (the folder of the plan; see --plans-root)");
  return OB_EXIT_USAGE;
}

/* Engine, tools, latent scripts, plan: everything `check` and `run` share.
 * Prints the problems and returns 2 when something is invalid. */
static int prepare(options *o, ob_engine **ep, ob_plan **pp, ob_value **plan_value) {
  ob_error err;
  *ep = NULL;
  *pp = NULL;
  *plan_value = NULL;
  ob_engine *e = *ep = ob_engine_new(NULL, &err);
  if (!e) {
    fprintf(stderr, "obelus %s: %s\n", o->cmd, err.msg);
    return OB_EXIT_USAGE;
  }
  ob_engine_set_max_memory(e, o->max_memory_mb << 20);
  for (int i = 0; i < o->ntools; i++)
    if (ob_engine_load_tools(e, o->tools[i], &err) != OB_OK) {
      fprintf(stderr, "obelus %s: %s\n", o->cmd, err.msg);
      return OB_EXIT_USAGE;
    }
  for (int i = 0; i < o->nlatent; i++)
    if (ob_engine_load_script(e, o->latent[i], &err) != OB_OK) {
      fprintf(stderr, "obelus %s: %s\n", o->cmd, err.msg);
      return OB_EXIT_USAGE;
    }
  ob_value *v = *plan_value = ob_json_parse_file(o->plan, &err);
  if (!v) {
    fprintf(stderr, "obelus %s: %s\n", o->cmd, err.msg);
    return OB_EXIT_USAGE;
  }
  if (plans_root(o) != OB_EXIT_OK)
    return OB_EXIT_USAGE;
  ob_plan *p = *pp = ob_plan_from_value(v, o->plan);
  p->root = ob_xstrdup(o->root);
  ob_plan_check_tools(p, &e->tools, ob_engine_has_latent(e));
  ob_run_check_messages(p, o->inputs, "--input", 1);
  ob_run_options count = {.max_calls = o->max_calls};
  if (ob_run_count_calls(p, &count, &err) != OB_OK)
    ob_plan_error(p, NULL, "%s", err.msg);
  for (size_t i = 0; i < p->nerrors; i++)
    fprintf(stderr, "%s\n", p->errors[i]);
  if (p->nerrors) {
    fprintf(stderr, "obelus %s: %zu problem%s, nothing ran\n", o->cmd, p->nerrors,
            p->nerrors == 1 ? "" : "s");
    return OB_EXIT_USAGE;
  }
  return OB_EXIT_OK;
}

static void cleanup(options *o, ob_engine *e, ob_plan *p, ob_value *plan_value);

/* What run, check and loop start with: the arguments, then the engine, tools
 * and plan. Returns -1 to go on, or the exit status (everything freed). */
static int begin(int argc, char **argv, const char *help, options *o, ob_engine **e, ob_plan **p,
                 ob_value **pv) {
  int rc = parse_args(argc, argv, o, help);
  if (rc) {
    ob_unref(o->inputs);
    return rc < 0 ? OB_EXIT_OK : rc;
  }
  if (strcmp(o->cmd, "check"))
    o->pg = progress_install(o);
  if ((rc = prepare(o, e, p, pv)) != OB_EXIT_OK) {
    cleanup(o, *e, *p, *pv);
    return rc;
  }
  return -1;
}

static void cleanup(options *o, ob_engine *e, ob_plan *p, ob_value *plan_value) {
  ob_engine_free(e); /* frees its runs first: they point into the plan */
  ob_plan_free(p);
  ob_unref(plan_value);
  ob_unref(o->inputs);
  free(o->root);
  o->root = NULL;
  progress_remove(o->pg); /* Lua held the stand-in streams until the engine went */
  o->pg = NULL;
}

int ob_cmd_check(int argc, char **argv) {
  options o;
  ob_engine *e;
  ob_plan *p;
  ob_value *pv;
  int rc = begin(argc, argv, check_help, &o, &e, &p, &pv);
  if (rc >= 0)
    return rc;
  size_t edges = 0;
  for (size_t i = 0; i < p->ncalls; i++)
    edges += p->calls[i].ndeps;
  printf("%s: ok, %zu call%s, %zu dependenc%s\n", o.plan, p->ncalls, p->ncalls == 1 ? "" : "s",
         edges, edges == 1 ? "y" : "ies");
  cleanup(&o, e, p, pv);
  return OB_EXIT_OK;
}

/* --- run ------------------------------------------------------------------------ */

typedef struct runner {
  options *o;
  ob_engine *e;
  ob_run *run;
  FILE *events;
  uv_signal_t sigint, sigterm;
  uv_timer_t drain;
  int signum, drain_started, drained, open;
  size_t calls_used; /* --max-calls: calls of every run so far (delegated, loop steps) */
} runner;

static void drain_expired(uv_timer_t *t) {
  runner *rn = t->data;
  rn->drained = 1;
  uv_stop(rn->e->loop);
}

static void on_done(ob_run *run, void *ud) {
  runner *rn = ud;
  (void)run;
  if (ob_run_detached_pending(rn->run) == 0) {
    uv_stop(rn->e->loop);
  } else if (!rn->drain_started) {
    rn->drain_started = 1;
    uv_timer_start(&rn->drain, drain_expired, rn->o->drain_ms, 0);
  }
}


static void on_event(void *ud, const ob_event *ev) {
  runner *rn = ud;
  if (rn->o->pg)
    progress_event(rn->o->pg, ev);
  if (rn->events) {
    ob_value *o = ob_object();
    o = ob_object_set(o, "t_ms", 4, ob_real(ev->t_ms));
    o = ob_object_set(o, "event", 5, ob_cstring(ob_event_name(ev->type)));
    if (ev->call) {
      o = ob_object_set(o, "call", 4, ob_cstring(ev->call->id));
      o = ob_object_set(o, "tool", 4, ob_cstring(ev->call->tool_name));
    }
    if (ev->reason)
      o = ob_object_set(o, "reason", 6, ob_cstring(ev->reason));
    char *text = ob_json_print(o, OB_JSON_COMPACT, NULL);
    fprintf(rn->events, "%s\n", text);
    fflush(rn->events);
    free(text);
    ob_unref(o);
  }
  /* a fire-and-forget call that ends after the run is done may be the last */
  if (rn->run && (ev->type == OB_EV_DONE || ev->type == OB_EV_FAILED) && rn->drain_started &&
      ob_run_detached_pending(rn->run) == 0)
    uv_stop(rn->e->loop);
}

static void on_signal(uv_signal_t *s, int signum) {
  runner *rn = s->data;
  rn->signum = signum;
  ob_run_cancel(rn->run);
  uv_stop(rn->e->loop);
}

/* Opens what a run writes to (journal, events) and the handles that drive it. */
static int runner_open(runner *rn, options *o, ob_engine *e, ob_wal **journal) {
  memset(rn, 0, sizeof *rn);
  rn->o = o;
  rn->e = e;
  *journal = NULL;
  ob_error err;
  if (o->journal &&
      !(*journal = ob_wal_open(e->loop, o->journal, OB_WAL_CREATE, o->fsync, &err))) {
    fprintf(stderr, "obelus %s: cannot write the journal: %s\n", o->cmd, err.msg);
    return OB_EXIT_USAGE;
  }
  if (o->events)
    rn->events = strcmp(o->events, "-") ? fopen(o->events, "w") : stderr;
  if (o->events && !rn->events) {
    fprintf(stderr, "obelus %s: cannot write the events to %s\n", o->cmd, o->events);
    return OB_EXIT_USAGE;
  }
  uv_timer_init(e->loop, &rn->drain);
  rn->drain.data = rn;
  uv_signal_init(e->loop, &rn->sigint);
  uv_signal_init(e->loop, &rn->sigterm);
  rn->sigint.data = rn->sigterm.data = rn;
  uv_signal_start(&rn->sigint, on_signal, SIGINT);
  uv_signal_start(&rn->sigterm, on_signal, SIGTERM);
  uv_unref((uv_handle_t *)&rn->sigint); /* they must not keep the loop alive */
  uv_unref((uv_handle_t *)&rn->sigterm);
  if (o->pg)
    progress_start(o->pg, e->loop);
  rn->open = 1;
  return OB_EXIT_OK;
}

/* Closes the journal (its last lines made durable as --fsync says): 1 when it
 * failed (said on stderr), the run's record then incomplete. */
static int journal_close(ob_engine *e, ob_wal **journal, const char *cmd) {
  ob_error err;
  if (*journal)
    ob_run_detach_journal(e, *journal);
  int failed = *journal && ob_wal_close(*journal, &err) != OB_OK;
  if (failed)
    fprintf(stderr, "obelus %s: the journal is incomplete: %s\n", cmd, err.msg);
  *journal = NULL;
  return failed;
}

static void runner_close(runner *rn, ob_wal **journal) {
  if (*journal)
    journal_close(rn->e, journal, rn->o->cmd);
  if (rn->open) {
    uv_close((uv_handle_t *)&rn->drain, NULL);
    uv_close((uv_handle_t *)&rn->sigint, NULL);
    uv_close((uv_handle_t *)&rn->sigterm, NULL);
    if (rn->o->pg && rn->o->pg->timer_open) {
      uv_close((uv_handle_t *)&rn->o->pg->timer, NULL);
      rn->o->pg->timer_open = 0;
    }
    uv_run(rn->e->loop, UV_RUN_NOWAIT);
  }
  if (rn->events && rn->events != stderr)
    fclose(rn->events);
}

/* Runs r until every awaited call has settled and the fire-and-forget ones are
 * drained (or the drain timeout passes). Returns 0, or 128 + the signal that
 * interrupted it. */
static int runner_drive(runner *rn, ob_run *r, size_t ncalls) {
  rn->run = r;
  rn->drain_started = rn->drained = 0;
  if (rn->o->pg) {
    rn->o->pg->run = r;
    rn->o->pg->ncalls = ncalls;
  }
  ob_run_start(r);
  for (;;) {
    if (!ob_run_finished(r) || ob_run_detached_pending(r))
      uv_run(rn->e->loop, UV_RUN_DEFAULT);
    if (rn->signum || rn->drained)
      break;
    if (ob_run_finished(r) && !ob_run_detached_pending(r))
      break;
    /* the loop has nothing left to do, yet calls wait: they never will finish */
    if (!uv_loop_alive(rn->e->loop) && ob_run_fail_stalled(r) == 0)
      break;
  }
  uv_timer_stop(&rn->drain);
  if (rn->o->pg)
    progress_end_run(rn->o->pg);
  if (rn->drained)
    fprintf(stderr, "obelus %s: %zu fire-and-forget call%s still running after %zu ms: "
                    "abandoned\n",
            rn->o->cmd, ob_run_detached_pending(r), ob_run_detached_pending(r) == 1 ? "" : "s",
            rn->o->drain_ms);
  ob_run_cancel(r);
  if (rn->signum) {
    fprintf(stderr, "obelus %s: interrupted by %s; running calls abandoned\n", rn->o->cmd,
            rn->signum == SIGINT ? "SIGINT" : "SIGTERM");
    return 128 + rn->signum;
  }
  return 0;
}

/* The options of a run started from the command line (log: a shared log, or NULL). */
static ob_run_options run_options(const options *o, runner *rn, ob_wal *journal, ob_log *log) {
  ob_run_options ro = {.concurrency = o->concurrency,
                       .max_depth = o->max_depth,
                       .approve_tty = o->approve,
                       .call_timeout_ms = (uint32_t)o->call_timeout_ms,
                       .max_output = o->max_output_kb << 10,
                       .max_slice_ms = (unsigned)o->max_slice_ms,
                       .max_calls = o->max_calls,
                       .calls_used = &rn->calls_used,
                       .journal = journal,
                       .log = log,
                       .plans_root = o->root,
                       .on_event = on_event,
                       .on_done = on_done,
                       .ud = rn};
  return ro;
}

static void print_json(const ob_value *v) {
  char *text = ob_json_print(v, OB_JSON_PRETTY, NULL);
  puts(text);
  free(text);
}

int ob_cmd_run(int argc, char **argv) {
  options o;
  ob_engine *e;
  ob_plan *p;
  ob_value *pv;
  int rc = begin(argc, argv, run_help, &o, &e, &p, &pv);
  if (rc >= 0)
    return rc;
  runner rn;
  ob_wal *journal;
  if ((rc = runner_open(&rn, &o, e, &journal)) == OB_EXIT_OK) {
    ob_run_options ro = run_options(&o, &rn, journal, NULL);
    ob_error err;
    ob_run *r = ob_run_new(e, p, pv, o.inputs, &ro, &err);
    if (!r) { /* prepare() tried the context already: this is unexpected */
      fprintf(stderr, "obelus run: %s\n", err.msg);
      rc = OB_EXIT_USAGE;
    } else if (!(rc = runner_drive(&rn, r, p->ncalls))) {
      rc = ob_run_failed(r) ? OB_EXIT_FAIL : OB_EXIT_OK;
      ob_run_journal_end(r, rc);
      if (journal_close(e, &journal, o.cmd) && rc == OB_EXIT_OK) /* the output is on disk first */
        rc = OB_EXIT_FAIL;
      ob_value *out = ob_run_output(r);
      print_json(out);
      ob_unref(out);
    }
  }
  runner_close(&rn, &journal);
  cleanup(&o, e, p, pv);
  return rc;
}

/* --- resume ---------------------------------------------------------------------- */

static int resume_loop(options *o, ob_engine *e, ob_plan *p, ob_resume *rs, ob_wal **journal);

static const char resume_help[] =
    "usage: obelus resume JOURNAL [--tools PATH]... [--force] [--latent FILE] [run options]\n"
    "\n"
    "Takes up the run whose journal (run --journal) is JOURNAL: rebuilds its log,\n"
    "runs only the calls that did not complete (a call that had started and not\n"
    "completed runs again: at least once), appends to the same journal, and\n"
    "prints the output and exits as the uninterrupted run would have. Without\n"
    "--tools, the tool files the run had are loaded again. A plan or tool file\n"
    "that changed since the run is refused (exit 2) unless --force. A run that\n"
    "ended prints its output again and runs nothing. Delegated plans stay confined\n"
    "to the plan's folder, or to --plans-root DIR (give the run's again).\n"
    "\n"
    "example:\n"
    "  obelus run plan.json --tools tools/ --journal run.jsonl   # killed midway\n"
    "  obelus resume run.jsonl\n";

int ob_cmd_resume(int argc, char **argv) {
  options o;
  int rc = parse_args(argc, argv, &o, resume_help);
  if (rc) {
    ob_unref(o.inputs);
    return rc < 0 ? OB_EXIT_OK : rc;
  }
  if (o.journal || ob_array_len(o.inputs)) {
    ob_unref(o.inputs);
    return ob_cli_usage_error("resume", "--journal and --input are the run's: resume appends to "
                                        "its journal and reads its inputs from it");
  }
  ob_error err;
  ob_resume *rs = ob_resume_load(o.plan, &err);
  if (!rs) {
    fprintf(stderr, "obelus resume: %s\n", err.msg);
    ob_unref(o.inputs);
    return OB_EXIT_USAGE;
  }
  const char *journal_path = o.plan;
  o.plan = ob_resume_plan_file(rs);
  o.pg = progress_install(&o);
  ob_engine *e = NULL;
  ob_plan *p = NULL;
  ob_value *pv = NULL;
  ob_wal *journal = NULL;
  rc = OB_EXIT_USAGE;
  if (plans_root(&o) != OB_EXIT_OK)
    goto done;
  if (!(e = ob_engine_new(NULL, &err))) {
    fprintf(stderr, "obelus resume: %s\n", err.msg);
    goto done;
  }
  ob_engine_set_max_memory(e, o.max_memory_mb << 20);
  const ob_value *then = ob_resume_tool_files(rs);
  for (size_t i = 0; !o.ntools && then && i < ob_array_len(then); i++) {
    ob_value *f = ob_object_get(ob_array_get(then, i), "file", 4);
    if (f && ob_typeof(f) == OB_STRING && ob_engine_load_tools(e, ob_string_ptr(f), &err) != OB_OK) {
      fprintf(stderr, "obelus resume: %s\n", err.msg);
      goto done;
    }
  }
  for (int i = 0; i < o.ntools; i++)
    if (ob_engine_load_tools(e, o.tools[i], &err) != OB_OK) {
      fprintf(stderr, "obelus resume: %s\n", err.msg);
      goto done;
    }
  for (int i = 0; i < o.nlatent; i++)
    if (ob_engine_load_script(e, o.latent[i], &err) != OB_OK) {
      fprintf(stderr, "obelus resume: %s\n", err.msg);
      goto done;
    }
  ob_buf why;
  ob_buf_init(&why);
  size_t changes;
  p = ob_resume_check(rs, e, o.plan, o.root, &pv, &why, &changes);
  for (size_t i = 0; i < p->nerrors; i++)
    fprintf(stderr, "%s\n", p->errors[i]);
  if (p->nerrors) {
    fprintf(stderr, "obelus resume: %zu problem%s, nothing ran\n", p->nerrors,
            p->nerrors == 1 ? "" : "s");
    ob_buf_free(&why);
    goto done;
  }
  if (changes && !o.force) {
    fprintf(stderr, "obelus resume: %s: %s; nothing ran (--force resumes anyway)\n",
            journal_path, why.data);
    ob_buf_free(&why);
    goto done;
  }
  if (changes)
    fprintf(stderr, "obelus resume: --force: %s\n", why.data);
  ob_buf_free(&why);
  int ended_status = 0, ended = ob_resume_ended(rs, &ended_status);
  if (ob_resume_loop(rs) && ended) { /* the loop's output again, nothing run */
    if (ob_resume_output(rs))
      print_json(ob_resume_output(rs));
    rc = ended_status;
    goto done;
  }
  if (ob_resume_open(rs, e->loop, o.fsync, &journal, &err) != OB_OK) {
    fprintf(stderr, "obelus resume: %s\n", err.msg);
    goto done;
  }
  if (ob_resume_loop(rs)) {
    rc = resume_loop(&o, e, p, rs, &journal);
    e = NULL; /* the loop freed it, before the step plans its runs point into */
    goto done;
  }
  runner rn;
  if ((rc = runner_open(&rn, &o, e, &(ob_wal *){NULL})) == OB_EXIT_OK) {
    ob_run_options ro = run_options(&o, &rn, NULL, NULL);
    ob_run *r = ob_resume_start(e, p, rs, journal, &ro, &err);
    if (!r) {
      fprintf(stderr, "obelus resume: %s\n", err.msg);
      rc = OB_EXIT_USAGE;
    } else if (!(rc = runner_drive(&rn, r, p->ncalls))) {
      rc = ob_resume_finish(rs, r);
      if (journal_close(e, &journal, o.cmd) && rc == OB_EXIT_OK)
        rc = OB_EXIT_FAIL;
      ob_value *out = ob_run_output(r);
      print_json(out);
      ob_unref(out);
    }
  }
  runner_close(&rn, &journal);
done:
  if (journal)
    journal_close(e, &journal, "resume");
  ob_engine_free(e);
  ob_plan_free(p);
  ob_unref(pv);
  ob_unref(o.inputs);
  free(o.root);
  progress_remove(o.pg);
  ob_resume_free(rs);
  return rc;
}

/* --- loop ------------------------------------------------------------------------ */

static const char loop_help[] =
    "usage: obelus loop PLAN --planner FILE.lua [--max-steps N] [--tools PATH]...\n"
    "                   [--input JSON|@FILE]... [--journal FILE] [run options]\n"
    "\n"
    "The planning loop: PLAN gives the initial context (its calls, if any, run\n"
    "first). Then, step after step, the planner is asked what to do: FILE.lua\n"
    "returns a function (ctx) -> { calls = {...}, output = value|nil }, where\n"
    "ctx.messages is the log so far and ctx:resolve(expr) reads a reference\n"
    "(nil when absent). The calls run as a plan on the shared log; their errors\n"
    "join the log; the planner is asked again, until it returns an output\n"
    "(printed, exit 0) or --max-steps (default 10) is reached (exit 1).\n"
    "\n"
    "example:\n"
    "  obelus loop plans/replan/plan.json --planner plans/replan/planner.lua \\\n"
    "              --tools plans/replan/tools\n";

/* ctx:resolve(expr): the value, or nil when absent. */
static int ctx_resolve(lua_State *L) {
  ob_log *log = lua_touserdata(L, lua_upvalueindex(1));
  size_t len;
  const char *s = luaL_checklstring(L, 2, &len);
  ob_expr e;
  ob_error err;
  if (ob_expr_parse(s, len, OB_EXPR_INPUT, &e, &err) != OB_OK)
    return luaL_error(L, "ctx:resolve: %s", err.msg);
  ob_value *v = ob_log_eval(log, &e, NULL, OB_LOG_NOW);
  ob_expr_free(&e);
  if (!v)
    return 0;
  int rc = ob_lua_push_safe(L, v, &err);
  ob_unref(v);
  return rc == OB_OK ? 1 : luaL_error(L, "ctx:resolve: %s", err.msg);
}

/* Pushes the planner's context: { step, messages, resolve }. */
static int push_ctx(lua_State *L, ob_log *log, int step) {
  ob_error err;
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, step);
  lua_setfield(L, -2, "step");
  lua_createtable(L, (int)ob_log_len(log), 0);
  for (size_t i = 0; i < ob_log_len(log); i++) {
    ob_value *m = ob_log_message(log, i);
    int rc = ob_lua_push_safe(L, m, &err);
    ob_unref(m);
    if (rc != OB_OK)
      return rc;
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "messages");
  lua_pushlightuserdata(L, log);
  lua_pushcclosure(L, ctx_resolve, 1);
  lua_setfield(L, -2, "resolve");
  return OB_OK;
}

/* A step's plan was invalid: its problems become error messages the planner reads. */
static void record_problems(ob_log *log, ob_wal *journal, const ob_plan *p, int step) {
  for (size_t i = 0; i < p->nerrors; i++) {
    ob_value *d = ob_object();
    d = ob_object_set(d, "error", 5, ob_cstring(p->errors[i]));
    d = ob_object_set(d, "phase", 5, ob_cstring("validation"));
    d = ob_object_set(d, "step", 4, ob_int(step));
    ob_value *m = ob_object_set(ob_object_set(ob_object_set(ob_object(), "type", 4,
                                                            ob_cstring("data")),
                                              "kind", 4, ob_cstring("error")),
                                "data", 4, d);
    ob_error err;
    if (ob_log_append(log, m, &err) >= 0 && journal) {
      ob_wal_add_value(journal, m);
      ob_wal_flush(journal);
    }
    ob_unref(m);
  }
}

/* A loop's journal records: the first run's "run" record holds "loop":
 * {"planner": its identity, "max_steps": N}; {"journal":"step","step":N,...}
 * for a step that ran no plan; {"journal":"end","exit":X,"output":V} when the loop ends. A step's
 * run writes its own records, each with "step":N (ob_record.c). */
static void journal_record(ob_wal *journal, ob_value *rec) {
  if (journal) {
    ob_wal_add_value(journal, rec);
    ob_wal_flush(journal);
  }
  ob_unref(rec);
}

static ob_value *record_new(const char *what) {
  return ob_object_set(ob_object(), "journal", 7, ob_cstring(what));
}

/* The planning loop as it goes, from `loop` or from `resume`. */
typedef struct looper {
  options *o;
  ob_engine *e;
  runner rn;
  ob_wal *journal;
  ob_log *log; /* shared by every step's run */
  ob_run_options ro;
  int planner; /* registry reference of the planner function */
  size_t nsteps;
  ob_plan **steps; /* each step's plan and its value, kept until the engine goes */
  ob_value **values;
} looper;

static void looper_init(looper *lp, options *o, ob_engine *e) {
  memset(lp, 0, sizeof *lp);
  lp->o = o;
  lp->e = e;
  lp->planner = LUA_NOREF;
  lp->log = ob_log_new();
  ob_log_keep_history(lp->log, 0);
  lp->steps = ob_xcalloc(o->max_steps + 2, sizeof *lp->steps);
  lp->values = ob_xcalloc(o->max_steps + 2, sizeof *lp->values);
}

/* Loads the planner file: OB_EXIT_OK, or 2 said on stderr. */
static int looper_planner(looper *lp) {
  lua_State *L = lp->e->L;
  if (luaL_loadfile(L, lp->o->planner) != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK ||
      !lua_isfunction(L, -1)) {
    fprintf(stderr, "obelus %s: %s\n", lp->o->cmd,
            lua_isstring(L, -1) ? lua_tostring(L, -1) : "the planner file must return a function");
    lua_pop(L, 1);
    return OB_EXIT_USAGE;
  }
  lp->planner = luaL_ref(L, LUA_REGISTRYINDEX);
  return OB_EXIT_OK;
}

/* Keeps a step's plan (made from calls, which it takes) for the engine's life. */
static ob_plan *looper_keep(looper *lp, ob_value *calls, int step) {
  char name[PATH_MAX + 32];
  snprintf(name, sizeof name, "%s#step%d", lp->o->plan, step);
  ob_plan *sp = ob_plan_from_value(calls ? calls : ob_null(), name);
  sp->root = ob_xstrdup(lp->o->root); /* the planner's _delegate too */
  lp->steps[lp->nsteps] = sp;
  lp->values[lp->nsteps++] = calls;
  ob_plan_check_tools(sp, &lp->e->tools, ob_engine_has_latent(lp->e));
  return sp;
}

/* Asks the planner at steps from `from` on; returns the exit status. */
static int looper_steps(looper *lp, int from) {
  lua_State *L = lp->e->L;
  options *o = lp->o;
  ob_error err;
  int rc = -1;
  for (int step = from; rc < 0 && step <= (int)o->max_steps; step++) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, lp->planner);
    if (push_ctx(L, lp->log, step) != OB_OK || lua_pcall(L, 1, 1, 0) != LUA_OK) {
      fprintf(stderr, "obelus %s: the planner failed at step %d: %s\n", o->cmd, step,
              lua_isstring(L, -1) ? lua_tostring(L, -1) : "(no message)");
      lua_settop(L, 0);
      rc = OB_EXIT_FAIL;
      break;
    }
    if (!lua_istable(L, -1)) {
      fprintf(stderr, "obelus %s: step %d: the planner must return { calls = ..., output = ... }\n",
              o->cmd, step);
      lua_settop(L, 0);
      rc = OB_EXIT_FAIL;
      break;
    }
    lua_getfield(L, -1, "output");
    if (!lua_isnil(L, -1)) {
      ob_value *out = ob_lua_to_value_named(L, -1, "output", &err);
      lua_settop(L, 0);
      if (!out) {
        fprintf(stderr, "obelus %s: step %d: %s\n", o->cmd, step, err.msg);
        rc = OB_EXIT_FAIL;
        break;
      }
      ob_value *end = ob_object_set(record_new("end"), "exit", 4, ob_int(0));
      journal_record(lp->journal, ob_object_set(end, "output", 6, ob_ref(out)));
      if (journal_close(lp->e, &lp->journal, o->cmd))
        rc = OB_EXIT_FAIL;
      else
        rc = OB_EXIT_OK;
      print_json(out);
      ob_unref(out);
      return rc;
    }
    lua_pop(L, 1);
    lua_getfield(L, -1, "calls");
    if (lua_isnil(L, -1)) { /* no calls, no output: ask again with nothing new */
      lua_settop(L, 0);
      journal_record(lp->journal, ob_object_set(record_new("step"), "step", 4, ob_int(step)));
      continue;
    }
    ob_value *calls = ob_lua_to_value_named(L, -1, "calls", &err);
    lua_settop(L, 0);
    if (calls && ob_typeof(calls) == OB_OBJECT && !ob_object_len(calls)) {
      ob_unref(calls); /* {} from Lua: an empty list */
      calls = ob_array();
    }
    ob_plan *sp = looper_keep(lp, calls, step);
    if (!calls)
      ob_plan_error(sp, NULL, "%s", err.msg);
    if (sp->nerrors) {
      record_problems(lp->log, lp->journal, sp, step);
      ob_value *rec = ob_object_set(record_new("step"), "step", 4, ob_int(step));
      journal_record(lp->journal,
                     ob_object_set(rec, "problems", 8, ob_int((int64_t)sp->nerrors)));
      continue;
    }
    ob_run_options ro = lp->ro;
    ro.journal_step = step;
    ob_run *r = ob_run_new(lp->e, sp, calls, NULL, &ro, &err);
    if (!r) {
      fprintf(stderr, "obelus %s: step %d: %s\n", o->cmd, step, err.msg);
      rc = OB_EXIT_FAIL;
      break;
    }
    int sig = runner_drive(&lp->rn, r, sp->ncalls);
    if (sig)
      return sig; /* interrupted: no end record, resume goes on from here */
  }
  if (rc < 0) {
    fprintf(stderr, "obelus %s: no output after %zu steps (see --max-steps)\n", o->cmd,
            o->max_steps);
    rc = OB_EXIT_FAIL;
  }
  journal_record(lp->journal, ob_object_set(record_new("end"), "exit", 4, ob_int(rc)));
  return rc;
}

static void looper_free(looper *lp) {
  if (lp->journal)
    journal_close(lp->e, &lp->journal, lp->o->cmd);
  runner_close(&lp->rn, &lp->journal);
  ob_engine_free(lp->e); /* frees the runs before the plans and the shared log they use */
  lp->e = NULL;
  for (size_t i = 0; i < lp->nsteps; i++) {
    ob_plan_free(lp->steps[i]);
    ob_unref(lp->values[i]);
  }
  free(lp->steps);
  free(lp->values);
  ob_log_free(lp->log);
}

int ob_cmd_loop(int argc, char **argv) {
  options o;
  ob_engine *e;
  ob_plan *p;
  ob_value *pv;
  int rc = begin(argc, argv, loop_help, &o, &e, &p, &pv);
  if (rc >= 0)
    return rc;
  looper lp;
  looper_init(&lp, &o, e);
  if ((rc = looper_planner(&lp)) != OB_EXIT_OK ||
      (rc = runner_open(&lp.rn, &o, e, &lp.journal)) != OB_EXIT_OK)
    goto done;
  lp.ro = run_options(&o, &lp.rn, lp.journal, lp.log);
  /* the run record says it is a loop's, with what resume needs to go on */
  ob_value *loop = ob_object_set(ob_object(), "planner", 7, ob_file_identity(o.planner));
  loop = ob_object_set(loop, "max_steps", 9, ob_int((int64_t)o.max_steps));
  ob_run_options first_opt = lp.ro;
  first_opt.journal_loop = loop;
  ob_error err;
  ob_run *first = ob_run_new(e, p, pv, o.inputs, &first_opt, &err);
  ob_unref(loop);
  if (!first) {
    fprintf(stderr, "obelus loop: %s\n", err.msg);
    rc = OB_EXIT_USAGE;
    goto done;
  }
  if ((rc = runner_drive(&lp.rn, first, p->ncalls)))
    goto done;
  rc = looper_steps(&lp, 1);
done:
  looper_free(&lp);
  cleanup(&o, NULL, p, pv);
  return rc;
}

/* `resume` of a loop's journal: the planner and --max-steps as the loop had
 * them, the shared log rebuilt, the step the journal reached taken up (its
 * run resumed like any run), then the planner asked from the next step on. */
static int resume_loop(options *o, ob_engine *e, ob_plan *p, ob_resume *rs, ob_wal **journal) {
  const ob_value *loop = ob_resume_loop(rs);
  ob_value *pl = ob_object_get(loop, "planner", 7), *ms = ob_object_get(loop, "max_steps", 9);
  ob_value *pf = pl ? ob_object_get(pl, "file", 4) : NULL;
  if (!pf || ob_typeof(pf) != OB_STRING) {
    fprintf(stderr, "obelus resume: %s: the loop record names no planner\n", o->plan);
    return OB_EXIT_USAGE;
  }
  o->planner = ob_string_ptr(pf);
  if (ms && ob_typeof(ms) == OB_INT && ob_int_value(ms) > 0 && ob_int_value(ms) <= 100000)
    o->max_steps = (size_t)ob_int_value(ms);
  ob_value *now = ob_file_identity(o->planner);
  int changed = !ob_equal(now, pl);
  ob_unref(now);
  if (changed && !o->force) {
    fprintf(stderr, "obelus resume: the planner %s changed since the run; nothing ran (--force "
                    "resumes anyway)\n", o->planner);
    return OB_EXIT_USAGE;
  }
  looper lp;
  looper_init(&lp, o, e);
  lp.journal = *journal;
  *journal = NULL;
  ob_error err;
  int rc = looper_planner(&lp);
  if (rc == OB_EXIT_OK && (rc = runner_open(&lp.rn, o, e, &(ob_wal *){NULL})) == OB_EXIT_OK) {
    lp.ro = run_options(o, &lp.rn, lp.journal, lp.log);
    lp.ro.resume = rs;
    int step = ob_resume_last_step(rs), need_run = step == 0;
    char key[32];
    snprintf(key, sizeof key, "step %d", step);
    ob_run *r = NULL;
    size_t ncalls = p->ncalls;
    if (ob_resume_fill_log(rs, lp.log, &err) != OB_OK) {
      need_run = 1;
    } else if (step == 0) { /* the first plan's run */
      r = ob_resume_run(e, p, rs, "", &lp.ro, &err);
    } else if ((need_run = ob_resume_has_run(rs, key))) { /* the step's run */
      ob_plan *sp = looper_keep(&lp, ob_ref((ob_value *)ob_resume_part_plan(rs, key)), step);
      ncalls = sp->ncalls;
      lp.ro.journal_step = step;
      if (sp->nerrors)
        ob_error_set(&err, OB_EINVAL, 0, "%s", sp->errors[0]);
      else
        r = ob_resume_run(e, sp, rs, key, &lp.ro, &err);
      lp.ro.journal_step = 0;
    }
    if (need_run && !r) {
      fprintf(stderr, "obelus resume: %s\n", err.msg);
      rc = OB_EXIT_USAGE;
    } else {
      journal_record(lp.journal, record_new("resume"));
      if (!(rc = r ? runner_drive(&lp.rn, r, ncalls) : 0))
        rc = looper_steps(&lp, step + 1);
    }
  }
  looper_free(&lp);
  return rc;
}
