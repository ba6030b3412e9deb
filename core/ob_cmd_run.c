/* ob_cmd_run.c -- `obelus run` and `obelus check`: load tools and a plan, validate
 * everything, and (run) execute it on a libuv loop, printing the final output. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ob_cli.h"
#include "ob_engine.h"
#include "ob_run.h"

static const char run_help[] =
    "usage: obelus run PLAN [--tools PATH]... [--input JSON|@FILE]... [--journal FILE]\n"
    "                  [--events FILE|-] [--concurrency N] [--drain-timeout MS] [--latent FILE]\n"
    "                  [--max-depth N]\n"
    "\n"
    "Validates PLAN against the tools, then runs every call as soon as its inputs\n"
    "exist, concurrently, and prints the final output as JSON on stdout.\n"
    "Exit 0: every awaited call done or skipped; 1: some call failed; 2: invalid\n"
    "plan, tool file or usage (nothing ran, stdout empty, no journal).\n"
    "\n"
    "  --tools PATH        a tool file (.lua) or a folder of them; repeatable\n"
    "  --input JSON|@FILE  adds {\"type\":\"data\",\"kind\":\"input\",\"data\":JSON}; repeatable\n"
    "  --journal FILE      the log as JSON Lines, written as it grows\n"
    "  --events FILE|-     scheduler events as JSON Lines (- for stderr)\n"
    "  --concurrency N     at most N calls running at once (default: unlimited)\n"
    "  --drain-timeout MS  how long to wait for fire-and-forget calls (default 5000)\n"
    "  --latent FILE       a Lua file that sets the latent handler (obelus.set_latent)\n"
    "  --max-depth N       how deep plans may delegate to plans (_delegate; default 16)\n"
    "\n"
    "examples:\n"
    "  obelus run plans/user-status/plan.json --tools plans/user-status/tools\n"
    "  obelus run plan.json --tools tools/ --input '{\"city\":\"Oslo\"}' --journal run.jsonl\n";

static const char check_help[] =
    "usage: obelus check PLAN [--tools PATH]... [--latent FILE]\n"
    "\n"
    "Validates PLAN without running anything: its shape, every call against its\n"
    "tool's schema, every reference and output path, and the dependency graph\n"
    "(cycles are named). Prints every problem as `file: call <id> (<tool>): <what>`.\n"
    "Exit 0 when valid, 2 otherwise.\n"
    "\n"
    "example:\n"
    "  obelus check plans/weather/plan.json --tools plans/weather/tools\n";

typedef struct options {
  const char *cmd, *plan, *journal, *events;
  const char *tools[64], *latent[16];
  int ntools, nlatent;
  ob_value *inputs; /* array */
  size_t concurrency, drain_ms;
  int max_depth;
} options;

static int parse_args(int argc, char **argv, options *o, const char *help) {
  memset(o, 0, sizeof *o);
  o->cmd = argv[0];
  o->drain_ms = 5000;
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
    } else if (!strcmp(a, "--latent") && val) {
      if (o->nlatent == 16)
        return ob_cli_usage_error(o->cmd, "too many --latent");
      o->latent[o->nlatent++] = argv[++i];
    } else if (!strcmp(a, "--journal") && val) {
      o->journal = argv[++i];
    } else if (!strcmp(a, "--events") && val) {
      o->events = argv[++i];
    } else if (!strcmp(a, "--concurrency") && val) {
      if (!ob_cli_parse_count(argv[++i], &o->concurrency) || !o->concurrency)
        return ob_cli_usage_error(o->cmd, "--concurrency needs a number of calls, 1 or more");
    } else if (!strcmp(a, "--max-depth") && val) {
      size_t d;
      if (!ob_cli_parse_count(argv[++i], &d) || d < 1 || d > 10000)
        return ob_cli_usage_error(o->cmd, "--max-depth needs a number from 1 to 10000");
      o->max_depth = (int)d;
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
  return 0;
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
  ob_plan *p = *pp = ob_plan_from_value(v, o->plan);
  ob_plan_check_tools(p, &e->tools, ob_engine_has_latent(e));
  /* the context and inputs must read as messages: try them on a scratch log */
  ob_log *scratch = ob_log_new();
  for (size_t i = 0; i < ob_array_len(p->context); i++)
    if (ob_log_append(scratch, ob_array_get(p->context, i), &err) < 0)
      ob_plan_error(p, NULL, "context[%zu]: %s", i, err.msg);
  for (size_t i = 0; i < ob_array_len(o->inputs); i++) {
    ob_value *m = ob_object_set(ob_object_set(ob_object(), "kind", 4, ob_cstring("input")),
                                "data", 4, ob_ref(ob_array_get(o->inputs, i)));
    if (ob_log_append(scratch, m, &err) < 0)
      ob_plan_error(p, NULL, "--input #%zu: %s", i + 1, err.msg);
    ob_unref(m);
  }
  ob_log_free(scratch);
  for (size_t i = 0; i < p->nerrors; i++)
    fprintf(stderr, "%s\n", p->errors[i]);
  if (p->nerrors) {
    fprintf(stderr, "obelus %s: %zu problem%s, nothing ran\n", o->cmd, p->nerrors,
            p->nerrors == 1 ? "" : "s");
    return OB_EXIT_USAGE;
  }
  return OB_EXIT_OK;
}

static void cleanup(options *o, ob_engine *e, ob_plan *p, ob_value *plan_value) {
  ob_engine_free(e); /* frees its runs first: they point into the plan */
  ob_plan_free(p);
  ob_unref(plan_value);
  ob_unref(o->inputs);
}

int ob_cmd_check(int argc, char **argv) {
  options o;
  int rc = parse_args(argc, argv, &o, check_help);
  if (rc)
    return ob_unref(o.inputs), rc < 0 ? OB_EXIT_OK : rc;
  ob_engine *e;
  ob_plan *p;
  ob_value *pv;
  rc = prepare(&o, &e, &p, &pv);
  if (rc == OB_EXIT_OK) {
    size_t edges = 0;
    for (size_t i = 0; i < p->ncalls; i++)
      edges += p->calls[i].ndeps;
    printf("%s: ok, %zu call%s, %zu dependenc%s\n", o.plan, p->ncalls, p->ncalls == 1 ? "" : "s",
           edges, edges == 1 ? "y" : "ies");
  }
  cleanup(&o, e, p, pv);
  return rc;
}

/* --- run ------------------------------------------------------------------------ */

typedef struct runner {
  options *o;
  ob_engine *e;
  ob_run *run;
  FILE *events;
  uv_signal_t sigint, sigterm;
  uv_timer_t drain;
  int signum, drain_started, drained;
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

static const char *event_names[] = {"ready", "started", "done", "skipped", "failed", "run_done"};

static void on_event(void *ud, const ob_event *ev) {
  runner *rn = ud;
  if (rn->events) {
    ob_value *o = ob_object();
    o = ob_object_set(o, "t_ms", 4, ob_real(ev->t_ms));
    o = ob_object_set(o, "event", 5, ob_cstring(event_names[ev->type]));
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

int ob_cmd_run(int argc, char **argv) {
  options o;
  int rc = parse_args(argc, argv, &o, run_help);
  if (rc)
    return ob_unref(o.inputs), rc < 0 ? OB_EXIT_OK : rc;
  ob_engine *e;
  ob_plan *p;
  ob_value *pv;
  if ((rc = prepare(&o, &e, &p, &pv)) != OB_EXIT_OK) {
    cleanup(&o, e, p, pv);
    return rc;
  }
  runner rn = {&o, e, NULL, NULL, {0}, {0}, {0}, 0, 0, 0};
  FILE *journal = NULL;
  if (o.journal && !(journal = fopen(o.journal, "w"))) {
    fprintf(stderr, "obelus run: cannot write the journal %s\n", o.journal);
    cleanup(&o, e, p, pv);
    return OB_EXIT_USAGE;
  }
  if (o.events)
    rn.events = strcmp(o.events, "-") ? fopen(o.events, "w") : stderr;
  if (o.events && !rn.events) {
    fprintf(stderr, "obelus run: cannot write the events to %s\n", o.events);
    if (journal)
      fclose(journal);
    cleanup(&o, e, p, pv);
    return OB_EXIT_USAGE;
  }
  ob_run_options ro = {.concurrency = o.concurrency,
                       .max_depth = o.max_depth,
                       .journal = journal,
                       .on_event = on_event,
                       .on_done = on_done,
                       .ud = &rn};
  ob_error err;
  rn.run = ob_run_new(e, p, pv, o.inputs, &ro, &err);
  if (!rn.run) { /* prepare() tried the context already: this is unexpected */
    fprintf(stderr, "obelus run: %s\n", err.msg);
    rc = OB_EXIT_USAGE;
  } else {
    uv_timer_init(e->loop, &rn.drain);
    rn.drain.data = &rn;
    uv_signal_init(e->loop, &rn.sigint);
    uv_signal_init(e->loop, &rn.sigterm);
    rn.sigint.data = rn.sigterm.data = &rn;
    uv_signal_start(&rn.sigint, on_signal, SIGINT);
    uv_signal_start(&rn.sigterm, on_signal, SIGTERM);
    uv_unref((uv_handle_t *)&rn.sigint); /* they must not keep the loop alive */
    uv_unref((uv_handle_t *)&rn.sigterm);
    ob_run_start(rn.run);
    for (;;) {
      if (!ob_run_finished(rn.run) || ob_run_detached_pending(rn.run))
        uv_run(e->loop, UV_RUN_DEFAULT);
      if (rn.signum || rn.drained)
        break;
      if (ob_run_finished(rn.run) && !ob_run_detached_pending(rn.run))
        break;
      /* the loop has nothing left to do, yet calls wait: they never will finish */
      if (!uv_loop_alive(e->loop) && ob_run_fail_stalled(rn.run) == 0)
        break;
    }
    if (rn.drained)
      fprintf(stderr, "obelus run: %zu fire-and-forget call%s still running after %zu ms: "
                      "abandoned\n",
              ob_run_detached_pending(rn.run), ob_run_detached_pending(rn.run) == 1 ? "" : "s",
              o.drain_ms);
    if (rn.signum) {
      fprintf(stderr, "obelus run: interrupted by %s; running calls abandoned\n",
              rn.signum == SIGINT ? "SIGINT" : "SIGTERM");
      rc = 128 + rn.signum;
    } else {
      ob_value *out = ob_run_output(rn.run);
      char *text = ob_json_print(out, OB_JSON_PRETTY, NULL);
      puts(text);
      free(text);
      ob_unref(out);
      rc = ob_run_failed(rn.run) ? OB_EXIT_FAIL : OB_EXIT_OK;
    }
    ob_run_cancel(rn.run);
    uv_close((uv_handle_t *)&rn.drain, NULL);
    uv_close((uv_handle_t *)&rn.sigint, NULL);
    uv_close((uv_handle_t *)&rn.sigterm, NULL);
    uv_run(e->loop, UV_RUN_NOWAIT);
  }
  if (journal)
    fclose(journal);
  if (rn.events && rn.events != stderr)
    fclose(rn.events);
  cleanup(&o, e, p, pv);
  return rc;
}
