/* many_engines.c -- an example host that makes and frees 100 engines, each running a
 * small plan (a C tool completing from a timer, then a Lua tool that sleeps), to show
 * that an engine leaves nothing behind: `make test` runs it under valgrind.
 *
 * Usage: many_engines [TOOLS.lua]   (default: examples/many_engines.lua)
 *
 * Half the engines run on the host's loop, two at a time (they share it and stay
 * independent); the other half make their own loop and are driven with
 * obelus_run_wait. Each run must end with the state {"a": i + 1, "b": (i + 1) * 2}.
 * Uses only <obelus.h>. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strdup; and uv.h needs the POSIX types a strict -std=c11 hides */
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <obelus.h>

#define ENGINES 100

/* `inc`, in C: x + 1, completed from a one-shot timer on the engine's loop. */
typedef struct inc_job {
  uv_timer_t timer;
  obelus_call *call;
  long x;
} inc_job;

static void inc_closed(uv_handle_t *h) { free(h->data); }

static void inc_fire(uv_timer_t *t) {
  inc_job *job = t->data;
  char result[32];
  snprintf(result, sizeof result, "%ld", job->x + 1);
  obelus_call_complete(job->call, result);
  uv_close((uv_handle_t *)t, inc_closed);
}

static void inc(obelus_call *call, const char *params, void *data) {
  obelus_engine *e = data;
  const char *x = strstr(params, "\"x\":"); /* the schema makes x an integer */
  inc_job *job = malloc(sizeof *job);
  if (!x || !job) {
    free(job);
    obelus_call_fail(call, "inc needs x");
    return;
  }
  job->call = call;
  job->x = strtol(x + 4, NULL, 10);
  uv_timer_init(obelus_engine_loop(e), &job->timer);
  job->timer.data = job;
  uv_timer_start(&job->timer, inc_fire, 1, 0);
}

typedef struct result {
  int status; /* -1 until the run is done */
  char *output;
} result;

static void on_done(obelus_run *run, int status, const char *output, void *data) {
  result *r = data;
  (void)run;
  r->status = status;
  r->output = strdup(output);
}

/* A new engine with both tools and a run of the plan for i, started. */
static obelus_engine *start(uv_loop_t *loop, const char *tools, int i, obelus_run **run,
                            result *r) {
  obelus_engine *e;
  char plan[512];
  snprintf(plan, sizeof plan,
           "[{\"_tool\":\"inc\",\"x\":%d,\"_outputPath\":\"†state.a\"},"
           "{\"_tool\":\"double\",\"x\":\"†state.a\",\"_outputPath\":\"†state.b\"}]",
           i);
  obelus_run_options opt = {.on_done = on_done, .data = r};
  r->status = -1;
  r->output = NULL;
  *run = NULL;
  if (obelus_engine_new(&e, loop) < 0)
    return NULL;
  if (obelus_engine_load_tools(e, tools) < 0 ||
      obelus_engine_add_tool(e, "inc", "{\"type\":\"object\",\"required\":[\"x\"],"
                                       "\"properties\":{\"x\":{\"type\":\"integer\"}}}",
                             inc, e) < 0 ||
      obelus_run_new(e, run, plan, &opt) < 0 || obelus_run_start(*run) < 0) {
    fprintf(stderr, "many_engines: %s\n", obelus_engine_errmsg(e));
    obelus_run_free(*run);
    obelus_engine_free(e);
    return NULL;
  }
  return e;
}

/* The run ended well, its state as expected; frees the output. */
static int check(int i, result *r) {
  char want[64];
  snprintf(want, sizeof want, "{\"a\":%d,\"b\":%d}", i + 1, (i + 1) * 2);
  int ok = r->status == 0 && r->output && !strcmp(r->output, want);
  if (!ok)
    fprintf(stderr, "many_engines: engine %d: status %d, output %s, expected %s\n", i, r->status,
            r->output ? r->output : "(none)", want);
  free(r->output);
  return ok;
}

int main(int argc, char **argv) {
  const char *tools = argc > 1 ? argv[1] : "examples/many_engines.lua";
  uv_loop_t loop;
  uv_loop_init(&loop);
  int ok = 0;

  /* Engines 0..49: two at a time on the host's loop. */
  for (int i = 0; i < ENGINES / 2; i += 2) {
    obelus_run *run[2];
    result r[2];
    obelus_engine *e[2] = {start(&loop, tools, i, &run[0], &r[0]),
                           start(&loop, tools, i + 1, &run[1], &r[1])};
    if (e[0] && e[1])
      uv_run(&loop, UV_RUN_DEFAULT); /* both runs end, then the loop has nothing left */
    for (int k = 0; k < 2; k++) {
      ok += e[k] && check(i + k, &r[k]);
      obelus_run_free(run[k]);
      obelus_engine_free(e[k]);
    }
    uv_run(&loop, UV_RUN_NOWAIT); /* the freed engines' handles are released */
  }

  /* Engines 50..99: each on a loop of its own. */
  for (int i = ENGINES / 2; i < ENGINES; i++) {
    obelus_run *run;
    result r;
    obelus_engine *e = start(NULL, tools, i, &run, &r);
    if (e && obelus_run_wait(run) == 0)
      ok += check(i, &r);
    else
      free(r.output);
    obelus_run_free(run);
    obelus_engine_free(e);
  }

  int closed = uv_loop_close(&loop) == 0;
  printf("many_engines: %d of %d engines ran their plan and were freed%s\n", ok, ENGINES,
         closed ? "" : "; handles left on the host's loop");
  return ok == ENGINES && closed ? 0 : 1;
}
