/* test_api_many_engines.c -- an embedding host that creates and frees 100 engines, each
 * loading Lua tools, registering a C tool, running a small plan (events on, a timer-driven
 * C call, a Lua sleep), refusing an invalid plan and cancelling a run: nothing may leak.
 * LeakSanitizer checks it in the ASan build; valgrind by hand:
 *   valgrind --leak-check=full --error-exitcode=9 build/test/rel/test_api_many_engines */
#include <unistd.h>

#include "obelus.h"
#include "test.h"

#define DAGGER "\xE2\x80\xA0"
#define ENGINES 100

static char dir[64];

typedef struct later {
  uv_timer_t t;
  obelus_call *call;
} later;

static void later_closed(uv_handle_t *h) { free(h); }

static void later_fire(uv_timer_t *t) {
  later *l = (later *)t;
  obelus_call_complete(l->call, "{\"from\":\"C\"}");
  uv_close((uv_handle_t *)t, later_closed);
}

static void c_later(obelus_call *call, const char *params, void *data) {
  (void)params;
  later *l = malloc(sizeof *l);
  l->call = call;
  uv_timer_init(obelus_engine_loop(data), &l->t);
  uv_timer_start(&l->t, later_fire, 1, 0);
}

static obelus_call *held;
static void hang(obelus_call *call, const char *params, void *data) {
  (void)params, (void)data;
  held = call;
}

typedef struct host {
  int events, done;
  char output[256];
} host;

static void on_event(obelus_run *run, const obelus_event *ev, void *data) {
  (void)run, (void)ev;
  ((host *)data)->events++;
}

static void on_done(obelus_run *run, int status, const char *output, void *data) {
  host *h = data;
  (void)run;
  h->done += status == 0;
  snprintf(h->output, sizeof h->output, "%s", output);
}

static const char *PLAN =
    "{\"context\":[{\"type\":\"input\",\"data\":{\"name\":\"n\"}}],\"plan\":["
    " {\"_id\":\"l\",\"_tool\":\"lua_tool\",\"name\":\"" DAGGER "input.name\",\"_outputPath\":\"l\"},"
    " {\"_id\":\"c\",\"_tool\":\"c_later\",\"x\":\"" DAGGER "state.l\",\"_outputPath\":\"c\"}],"
    " \"output\":{\"l\":\"" DAGGER "state.l\",\"c\":\"" DAGGER "state.c.from\"}}";

/* One engine's whole life; on the host's loop when `loop` is given. */
static int one_engine(uv_loop_t *loop, int i) {
  obelus_engine *e;
  if (obelus_engine_new(&e, loop) != OBELUS_OK)
    return 0;
  int ok = obelus_engine_load_tools(e, dir) == OBELUS_OK &&
           obelus_engine_add_tool(e, "c_later", "{\"type\":\"object\"}", c_later, e) ==
               OBELUS_OK &&
           obelus_engine_add_tool(e, "hang", NULL, hang, NULL) == OBELUS_OK;
  host h = {0};
  obelus_run_options opt = {0};
  opt.on_event = on_event;
  opt.on_done = on_done;
  opt.data = &h;
  opt.time_travel = i % 2;
  obelus_run *run = NULL, *bad = NULL, *cancelled = NULL;
  ok = ok && obelus_run_new(e, &run, PLAN, &opt) == OBELUS_OK;
  ok = ok && obelus_run_start(run) == OBELUS_OK;
  if (ok && loop)
    while (!h.done && uv_run(loop, UV_RUN_ONCE))
      ;
  else if (ok)
    ok = obelus_run_wait(run) == 0;
  ok = ok && h.done == 1 && h.events == 7 && !strcmp(h.output, "{\"l\":\"lua:n\",\"c\":\"C\"}");
  /* an invalid plan, then a run cancelled while a C call hangs */
  ok = ok && obelus_run_new(e, &bad, "[{\"_tool\":\"nope\"}]", NULL) == OBELUS_EINVAL;
  ok = ok && obelus_run_new(e, &cancelled, "[{\"_tool\":\"hang\",\"_outputPath\":\"h\"},"
                                           " {\"_tool\":\"lua_tool\",\"name\":\"z\",\"ms\":50,"
                                           "  \"_outputPath\":\"z\"}]",
                            &opt) == OBELUS_OK;
  ok = ok && obelus_run_start(cancelled) == OBELUS_OK;
  obelus_run_cancel(cancelled);
  if (i % 3 == 0) /* some handles outlive their run and engine */
    obelus_run_free(run), run = NULL;
  obelus_engine_free(e); /* frees what is left */
  if (held)
    obelus_call_complete(held, "null");
  held = NULL;
  if (loop)
    uv_run(loop, UV_RUN_NOWAIT);
  return ok;
}

TEST(a_hundred_engines_come_and_go) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  int ok = 0;
  for (int i = 0; i < ENGINES; i++)
    ok += one_engine(i % 2 ? &loop : NULL, i);
  CHECK_INT(ok, ENGINES);
  CHECK_INT(uv_loop_close(&loop), 0);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/obelus-api-many-XXXXXX");
  if (!mkdtemp(dir))
    return 1;
  char path[96];
  snprintf(path, sizeof path, "%s/lua_tool.lua", dir);
  FILE *f = fopen(path, "w");
  fputs("local obelus = require 'obelus'\n"
        "return { name = 'lua_tool', run = function(c)\n"
        "  obelus.sleep(c.ms or 1); return 'lua:' .. c.name end }\n",
        f);
  fclose(f);
  RUN(a_hundred_engines_come_and_go);
  unlink(path);
  rmdir(dir);
  return TEST_END();
}
