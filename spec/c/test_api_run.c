/* test_api_run.c -- a plan run through the public API (obelus.h only): Lua tools from a
 * temp folder, C tools completing now and later (timers on the host's loop), a loop the
 * host owns and advances with UV_RUN_NOWAIT like a game's frame loop; plans from text and file. */
#include <sys/stat.h>
#include <unistd.h>

#include "obelus.h"
#include "test.h"

static char dir[64];

static void write_file(const char *name, const char *text) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
}

static void remove_files(void) {
  const char *names[] = {"tools/double.lua", "tools/greet.lua", "plan.json", "tools"};
  char path[128];
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    if (unlink(path) != 0)
      rmdir(path);
  }
  rmdir(dir);
}

/* The integer after "key": in a JSON text (the tests' params are flat). */
static long json_int(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  return p ? strtol(p + strlen(pat), NULL, 10) : -999;
}

/* --- C tools --- */

static char first_params[256];
static int now_calls, later_calls;

static void add_now(obelus_call *call, const char *params, void *data) {
  (void)data;
  if (!now_calls++)
    snprintf(first_params, sizeof first_params, "%s", params);
  char out[32];
  snprintf(out, sizeof out, "%ld", json_int(params, "x") + 1);
  CHECK_INT(obelus_call_complete(call, out), OBELUS_OK);
}

typedef struct later {
  uv_timer_t timer;
  obelus_call *call;
  long x;
} later;

static void later_closed(uv_handle_t *h) { free(h); }

static void later_fire(uv_timer_t *t) {
  later *l = (later *)t;
  char out[64];
  snprintf(out, sizeof out, "{\"by\":\"%s\",\"x\":%ld}", obelus_call_id(l->call), l->x + 1);
  CHECK_INT(obelus_call_complete(l->call, out), OBELUS_OK);
  uv_close((uv_handle_t *)t, later_closed);
}

/* Completes later, from a timer on the host's loop (data is that loop). */
static void add_later(obelus_call *call, const char *params, void *data) {
  later_calls++;
  later *l = malloc(sizeof *l);
  l->call = call;
  l->x = json_int(params, "x");
  uv_timer_init((uv_loop_t *)data, &l->timer);
  uv_timer_start(&l->timer, later_fire, (uint64_t)json_int(params, "ms"), 0);
}

/* --- the host --- */

typedef struct host {
  int done, status, frames;
  char output[512];
} host;

static void on_done(obelus_run *run, int status, const char *output, void *data) {
  host *h = data;
  (void)run;
  h->done++;
  h->status = status;
  snprintf(h->output, sizeof h->output, "%s", output);
}

/* A frame loop: one non-blocking turn of the loop per frame, 1 ms apart. */
static void frames(uv_loop_t *loop, host *h) {
  for (h->frames = 0; !h->done && h->frames < 5000; h->frames++) {
    uv_run(loop, UV_RUN_NOWAIT);
    if (!h->done)
      usleep(1000);
  }
}

static const char *PLAN =
    "{\"context\":[{\"type\":\"input\",\"data\":{\"n\":3}}],"
    " \"plan\":["
    "  {\"_id\":\"a\",\"_tool\":\"add_now\",\"x\":\"\xE2\x80\xA0input.n\",\"_outputPath\":\"\xE2\x80\xA0state.a\"},"
    "  {\"_id\":\"b\",\"_tool\":\"double\",\"x\":\"\xE2\x80\xA0state.a\",\"ms\":5,\"_outputPath\":\"\xE2\x80\xA0state.b\"},"
    "  {\"_id\":\"c\",\"_tool\":\"add_later\",\"x\":\"\xE2\x80\xA0state.b\",\"ms\":10,\"_outputPath\":\"\xE2\x80\xA0state.c\"},"
    "  {\"_id\":\"d\",\"_tool\":\"double\",\"x\":\"\xE2\x80\xA0state.c.x\",\"_outputPath\":\"\xE2\x80\xA0state.d\"},"
    "  {\"_id\":\"g\",\"_tool\":\"greet\",\"who\":\"\xE2\x80\xA0input.who\",\"_outputPath\":\"\xE2\x80\xA0state.hello\"}"
    " ],"
    " \"output\":{\"a\":\"\xE2\x80\xA0state.a\",\"c\":\"\xE2\x80\xA0state.c\",\"d\":\"\xE2\x80\xA0state.d\","
    "             \"hello\":\"\xE2\x80\xA0state.hello\"}}";

static obelus_engine *make_engine(uv_loop_t *loop) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, loop), OBELUS_OK);
  CHECK(obelus_engine_loop(e) == loop);
  char tools[96];
  snprintf(tools, sizeof tools, "%s/tools", dir);
  CHECK_INT(obelus_engine_load_tools(e, tools), OBELUS_OK);
  CHECK_STR(obelus_engine_errmsg(e), "");
  CHECK_INT(obelus_engine_add_tool(e, "add_now",
                                   "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"}},"
                                   "\"required\":[\"x\"]}",
                                   add_now, NULL),
            OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "add_later", NULL, add_later, loop), OBELUS_OK);
  return e;
}

TEST(lua_and_c_tools_on_a_host_loop_advanced_with_nowait) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  obelus_engine *e = make_engine(&loop);
  now_calls = later_calls = 0;
  host h = {0};
  obelus_run_options opt = {0};
  opt.input = "{\"who\":\"Ada\"}";
  opt.on_done = on_done;
  opt.data = &h;
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run, PLAN, &opt), OBELUS_OK);
  CHECK_INT(obelus_run_status(run), OBELUS_EBUSY);
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  /* add_now completed inside start; callbacks come from the loop only */
  CHECK_INT(now_calls, 1);
  CHECK_INT(h.done, 0);
  CHECK_STR(first_params, "{\"_id\":\"a\",\"_tool\":\"add_now\",\"x\":3,"
                          "\"_outputPath\":\"\xE2\x80\xA0state.a\"}");
  frames(&loop, &h);
  CHECK_INT(h.done, 1);
  CHECK_INT(h.status, 0);
  CHECK_INT(later_calls, 1);
  CHECK(h.frames > 1); /* a 5 ms Lua sleep, then a 10 ms timer: NOWAIT waited for neither */
  CHECK_STR(h.output, "{\"a\":4,\"c\":{\"by\":\"c\",\"x\":9},\"d\":18,\"hello\":\"hello, Ada\"}");
  CHECK_INT(obelus_run_status(run), 0);
  char *out = obelus_run_output(run);
  CHECK_STR(out, h.output);
  free(out);
  obelus_run_free(run);
  obelus_engine_free(e);
  uv_run(&loop, UV_RUN_NOWAIT); /* the engine's closed handles go */
  CHECK_INT(uv_loop_close(&loop), 0);
}

TEST(a_plan_file_on_the_engines_own_loop_with_wait) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  char tools[96], plan[96];
  snprintf(tools, sizeof tools, "%s/tools", dir);
  snprintf(plan, sizeof plan, "%s/plan.json", dir);
  write_file("plan.json", PLAN);
  CHECK_INT(obelus_engine_load_tools(e, tools), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "add_now", NULL, add_now, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "add_later", NULL, add_later, obelus_engine_loop(e)),
            OBELUS_OK);
  host h = {0};
  obelus_run_options opt = {0};
  opt.on_done = on_done;
  opt.data = &h;
  opt.concurrency = 1;
  obelus_run *run;
  CHECK_INT(obelus_run_new_file(e, &run, plan, &opt), OBELUS_OK);
  CHECK_INT(obelus_run_wait(run), OBELUS_EINVAL); /* not started */
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  /* no input given: greet's reference is absent and nothing writes it (structural) */
  CHECK_INT(obelus_run_wait(run), 1);
  CHECK_INT(h.done, 1);
  CHECK_INT(h.status, 1);
  CHECK_INT(obelus_run_status(run), 1);
  CHECK_STR(h.output, "{\"a\":4,\"c\":{\"by\":\"c\",\"x\":9},\"d\":18,\"hello\":null}");
  CHECK_INT(obelus_run_wait(run), 1); /* already over: at once */
  obelus_run_free(run);
  obelus_engine_free(e);
}

TEST(a_plan_with_no_calls_completes_from_the_loop) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  host h = {0};
  obelus_run_options opt = {0};
  opt.on_done = on_done;
  opt.data = &h;
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run, "{\"context\":[{\"type\":\"state\",\"data\":{\"k\":1}}],"
                                    "\"plan\":[]}", &opt),
            OBELUS_OK);
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  CHECK_INT(h.done, 0); /* finished inside start, reported by the loop */
  CHECK_INT(obelus_run_status(run), 0);
  uv_run(obelus_engine_loop(e), UV_RUN_NOWAIT);
  CHECK_INT(h.done, 1);
  CHECK_STR(h.output, "{\"k\":1}");
  obelus_run_free(run);
  obelus_engine_free(e);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/obelus-api-run-XXXXXX");
  if (!mkdtemp(dir))
    return 1;
  char tools[96];
  snprintf(tools, sizeof tools, "%s/tools", dir);
  mkdir(tools, 0700);
  write_file("tools/double.lua",
             "local obelus = require 'obelus'\n"
             "return { name = 'double',\n"
             "  schema = { type = 'object', properties = { x = { type = 'integer' } },\n"
             "             required = { 'x' } },\n"
             "  run = function(call)\n"
             "    if call.ms then obelus.sleep(call.ms) end\n"
             "    return call.x * 2\n"
             "  end }\n");
  write_file("tools/greet.lua",
             "return { name = 'greet', run = function(call) return 'hello, ' .. call.who end }\n");
  RUN(lua_and_c_tools_on_a_host_loop_advanced_with_nowait);
  RUN(a_plan_file_on_the_engines_own_loop_with_wait);
  RUN(a_plan_with_no_calls_completes_from_the_loop);
  remove_files();
  return TEST_END();
}
