/* test_api_engines.c -- two engines in one process are independent: each has its own
 * tools (same names, different code), its own Lua state, its own errors and runs; their
 * runs interleave on one shared loop or on two loops driven in turn; freeing one engine
 * mid-run leaves the other running. */
#include <unistd.h>

#include "obelus.h"
#include "test.h"

#define DAGGER "\xE2\x80\xA0"

static char dir[64], sleepy_file[96], counter_file[96];

typedef struct who {
  const char *name; /* what this engine's `who` answers */
  uv_loop_t *loop;
  unsigned delay;
  int calls;
  char trace[256]; /* call ids in completion order, shared by both engines */
} who;

static char order[512]; /* both engines' completions, interleaved as they happened */

typedef struct pending {
  uv_timer_t t;
  obelus_call *call;
  who *w;
} pending;

static void pending_closed(uv_handle_t *h) { free(h); }

static void pending_fire(uv_timer_t *t) {
  pending *p = (pending *)t;
  char out[64];
  snprintf(out, sizeof out, "\"%s:%s\"", p->w->name, obelus_call_id(p->call));
  size_t n = strlen(order);
  snprintf(order + n, sizeof order - n, "%s%s", n ? " " : "", out);
  obelus_call_complete(p->call, out);
  uv_close((uv_handle_t *)t, pending_closed);
}

static void who_tool(obelus_call *call, const char *params, void *data) {
  (void)params;
  who *w = data;
  w->calls++;
  pending *p = malloc(sizeof *p);
  p->call = call;
  p->w = w;
  uv_timer_init(w->loop, &p->t);
  uv_timer_start(&p->t, pending_fire, w->delay, 0);
}

static obelus_engine *engine(uv_loop_t *loop, who *w, int with_lua) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, loop), OBELUS_OK);
  w->loop = obelus_engine_loop(e);
  CHECK_INT(obelus_engine_add_tool(e, "who", NULL, who_tool, w), OBELUS_OK);
  if (with_lua) {
    CHECK_INT(obelus_engine_load_tools(e, sleepy_file), OBELUS_OK);
    CHECK_INT(obelus_engine_load_tools(e, counter_file), OBELUS_OK);
  }
  return e;
}

typedef struct host {
  int done, status;
  char output[256];
} host;

static void on_done(obelus_run *run, int status, const char *output, void *data) {
  host *h = data;
  (void)run;
  h->done++;
  h->status = status;
  snprintf(h->output, sizeof h->output, "%s", output);
}

static obelus_run *start(obelus_engine *e, const char *plan, host *h) {
  obelus_run_options opt = {0};
  opt.on_done = on_done;
  opt.data = h;
  obelus_run *run = NULL;
  CHECK_INT(obelus_run_new(e, &run, plan, &opt), OBELUS_OK);
  if (run)
    CHECK_INT(obelus_run_start(run), OBELUS_OK);
  return run;
}

/* A chain of `who` calls: each waits for the one before. */
static const char *CHAIN3 =
    "{\"plan\":["
    " {\"_id\":\"a\",\"_tool\":\"who\",\"_outputPath\":\"a\"},"
    " {\"_id\":\"b\",\"_tool\":\"who\",\"after\":\"" DAGGER "state.a\",\"_outputPath\":\"b\"},"
    " {\"_id\":\"c\",\"_tool\":\"who\",\"after\":\"" DAGGER "state.b\",\"_outputPath\":\"c\"}],"
    " \"output\":[\"" DAGGER "state.a\",\"" DAGGER "state.b\",\"" DAGGER "state.c\"]}";

TEST(two_engines_on_one_loop_interleave_independently) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  who w1 = {.name = "one", .delay = 3}, w2 = {.name = "two", .delay = 5};
  obelus_engine *e1 = engine(&loop, &w1, 1), *e2 = engine(&loop, &w2, 0);
  /* e2 has no Lua tools: its plan is invalid, e1's errors stay clean */
  obelus_run *bad;
  CHECK_INT(obelus_run_new(e2, &bad, "[{\"_tool\":\"sleepy\",\"ms\":1,\"_outputPath\":\"x\"}]", NULL),
            OBELUS_EINVAL);
  CHECK(strstr(obelus_engine_errmsg(e2), "sleepy") != NULL);
  CHECK_STR(obelus_engine_errmsg(e1), "");
  host h1 = {0}, h2 = {0};
  order[0] = 0;
  obelus_run *r1 = start(e1, CHAIN3, &h1), *r2 = start(e2, CHAIN3, &h2);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK_INT(h1.done, 1);
  CHECK_INT(h2.done, 1);
  CHECK_STR(h1.output, "[\"one:a\",\"one:b\",\"one:c\"]");
  CHECK_STR(h2.output, "[\"two:a\",\"two:b\",\"two:c\"]");
  CHECK_INT(w1.calls, 3);
  CHECK_INT(w2.calls, 3);
  /* 3 ms steps against 5 ms steps: the chains ran side by side (the exact
   * turns depend on timing: "one:a two:a one:b one:c two:b two:c" when idle) */
  CHECK(strstr(order, "two:a") < strstr(order, "one:c"));
  CHECK(strstr(order, "one:a") < strstr(order, "two:c"));
  obelus_run_free(r1);
  obelus_run_free(r2);

  /* free e1 while both run: e2's run goes on and finishes */
  host h3 = {0}, h4 = {0};
  start(e1, CHAIN3, &h3);
  obelus_run *r4 = start(e2, CHAIN3, &h4);
  while (w1.calls < 4 || w2.calls < 4) /* both first calls under way */
    uv_run(&loop, UV_RUN_ONCE);
  obelus_engine_free(e1); /* frees its run; its pending handle is completed later, harmlessly */
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK_INT(h3.done, 0);
  CHECK_INT(h4.done, 1);
  CHECK_STR(h4.output, "[\"two:a\",\"two:b\",\"two:c\"]");
  obelus_run_free(r4);
  obelus_engine_free(e2);
  uv_run(&loop, UV_RUN_NOWAIT);
  CHECK_INT(uv_loop_close(&loop), 0);
}

TEST(two_engines_on_their_own_loops_driven_in_turn) {
  who w1 = {.name = "one", .delay = 1}, w2 = {.name = "two", .delay = 1};
  obelus_engine *e1 = engine(NULL, &w1, 1), *e2 = engine(NULL, &w2, 1);
  CHECK(obelus_engine_loop(e1) != obelus_engine_loop(e2));
  /* the same Lua tool in each: a global counter per Lua state */
  const char *plan = "[{\"_id\":\"x\",\"_tool\":\"counter\",\"_outputPath\":\"x\"},"
                     " {\"_id\":\"y\",\"_tool\":\"counter\",\"after\":\"" DAGGER "state.x\",\"_outputPath\":\"y\"},"
                     " {\"_id\":\"s\",\"_tool\":\"sleepy\",\"ms\":3,\"_outputPath\":\"s\"},"
                     " {\"_id\":\"w\",\"_tool\":\"who\",\"after\":\"" DAGGER "state.s\",\"_outputPath\":\"w\"}]";
  host h1 = {0}, h2 = {0}, h3 = {0};
  obelus_run *r1 = start(e1, plan, &h1), *r2 = start(e2, plan, &h2);
  for (int i = 0; i < 5000 && (!h1.done || !h2.done); i++) {
    uv_run(obelus_engine_loop(e1), UV_RUN_NOWAIT);
    uv_run(obelus_engine_loop(e2), UV_RUN_NOWAIT);
    usleep(200);
  }
  CHECK_STR(h1.output, "{\"x\":1,\"y\":2,\"s\":3,\"w\":\"one:w\"}");
  CHECK_STR(h2.output, "{\"x\":1,\"y\":2,\"s\":3,\"w\":\"two:w\"}");
  /* a second run on e1 sees e1's counter go on; e2's is untouched */
  obelus_run *r3 = start(e1, plan, &h3);
  CHECK_INT(obelus_run_wait(r3), 0);
  CHECK_STR(h3.output, "{\"x\":3,\"y\":4,\"s\":3,\"w\":\"one:w\"}");
  char *v;
  CHECK_INT(obelus_run_resolve(r2, DAGGER "state.y", NULL, OBELUS_NOW, &v), OBELUS_OK);
  CHECK_STR(v, "2");
  free(v);
  obelus_run_free(r1);
  obelus_run_free(r2);
  obelus_run_free(r3);
  obelus_engine_free(e2);
  obelus_engine_free(e1);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/obelus-api-engines-XXXXXX");
  if (!mkdtemp(dir))
    return 1;
  snprintf(sleepy_file, sizeof sleepy_file, "%s/sleepy.lua", dir);
  snprintf(counter_file, sizeof counter_file, "%s/counter.lua", dir);
  FILE *f = fopen(sleepy_file, "w");
  fputs("local obelus = require 'obelus'\n"
        "return { name = 'sleepy', run = function(c) obelus.sleep(c.ms); return c.ms end }\n",
        f);
  fclose(f);
  f = fopen(counter_file, "w");
  fputs("return { name = 'counter', run = function() counter = (counter or 0) + 1; "
        "return counter end }\n",
        f);
  fclose(f);
  RUN(two_engines_on_one_loop_interleave_independently);
  RUN(two_engines_on_their_own_loops_driven_in_turn);
  unlink(sleepy_file);
  unlink(counter_file);
  rmdir(dir);
  return TEST_END();
}
