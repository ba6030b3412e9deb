/* test_api_cancel.c -- cancelling and freeing runs through the public API: a cancelled
 * run's calls never complete, nothing more is written or reported, and completing a C
 * tool's handle afterwards (after cancel, after free) is harmless; runs may be cancelled
 * or freed from their own callbacks, and freed from inside a C tool's function. */
#include <unistd.h>

#include "obelus.h"
#include "test.h"

#define DAGGER "\xE2\x80\xA0"

static char dir[64], tool_file[96];

/* Keeps the handle: completed by the test itself, much later. */
static obelus_call *held;
static void hang(obelus_call *call, const char *params, void *data) {
  (void)params, (void)data;
  held = call;
}

typedef struct host {
  obelus_run *run;
  int events, events_after_cancel, done, cancelled;
  const char *cancel_on; /* cancel when this call is reported done */
  int free_in_done;
} host;

static void on_event(obelus_run *run, const obelus_event *ev, void *data) {
  host *h = data;
  h->events++;
  if (h->cancelled)
    h->events_after_cancel++;
  if (h->cancel_on && ev->type == OBELUS_EVENT_DONE && !strcmp(ev->call_id, h->cancel_on)) {
    obelus_run_cancel(run);
    obelus_run_cancel(run); /* twice is harmless */
    h->cancelled = 1;
  }
}

static void on_done(obelus_run *run, int status, const char *output, void *data) {
  host *h = data;
  (void)status, (void)output;
  h->done++;
  if (h->free_in_done) {
    obelus_run_free(run);
    h->run = NULL;
  }
}

static void cancel_timer(uv_timer_t *t) {
  host *h = t->data;
  obelus_run_cancel(h->run);
  h->cancelled = 1;
}

static obelus_engine *engine(uv_loop_t *loop) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, loop), OBELUS_OK);
  CHECK_INT(obelus_engine_load_tools(e, tool_file), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "hang", NULL, hang, NULL), OBELUS_OK);
  return e;
}

static obelus_run *start(obelus_engine *e, const char *plan, host *h) {
  obelus_run_options opt = {0};
  opt.on_event = on_event;
  opt.on_done = on_done;
  opt.data = h;
  opt.time_travel = 1;
  CHECK_INT(obelus_run_new(e, &h->run, plan, &opt), OBELUS_OK);
  CHECK_INT(obelus_run_start(h->run), OBELUS_OK);
  return h->run;
}

static const char *PLAN = /* a C call that hangs, a Lua call that sleeps an hour, a follower */
    "[{\"_id\":\"h\",\"_tool\":\"hang\",\"_outputPath\":\"" DAGGER "state.h\"},"
    " {\"_id\":\"s\",\"_tool\":\"sleepy\",\"ms\":3600000,\"_outputPath\":\"" DAGGER "state.s\"},"
    " {\"_id\":\"f\",\"_tool\":\"sleepy\",\"ms\":0,\"x\":\"" DAGGER "state.s\",\"_outputPath\":\"" DAGGER "state.f\"}]";

TEST(cancel_from_a_timer_stops_the_run_and_late_completion_is_harmless) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  obelus_engine *e = engine(&loop);
  host h = {0};
  held = NULL;
  obelus_run *run = start(e, PLAN, &h);
  CHECK(held != NULL);
  uv_timer_t t;
  uv_timer_init(&loop, &t);
  t.data = &h;
  uv_timer_start(&t, cancel_timer, 10, 0);
  /* ends once nothing is left: the hour's sleep is gone too (one that waited for it
   * would hang: spec/run-c caps each program) */
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(h.cancelled);
  CHECK_INT(h.done, 0);
  CHECK_INT(h.events_after_cancel, 0);
  CHECK_INT(obelus_run_status(run), OBELUS_ECANCELED);
  CHECK_INT(obelus_run_wait(run), OBELUS_ECANCELED);
  CHECK_INT(obelus_run_start(run), OBELUS_ECANCELED);
  size_t pos = obelus_run_position(run);
  /* the hanging call completes now: nothing happens to the run */
  CHECK_STR(obelus_call_id(held), "h");
  CHECK_INT(obelus_call_complete(held, "1"), OBELUS_OK);
  uv_run(&loop, UV_RUN_NOWAIT);
  char *v = NULL;
  CHECK_INT(obelus_run_resolve(run, DAGGER "state.h", NULL, OBELUS_NOW, &v), OBELUS_ENOENT);
  CHECK_INT(obelus_run_resolve(run, DAGGER "state.s", NULL, OBELUS_NOW, &v), OBELUS_ENOENT);
  CHECK_INT(obelus_run_position(run), pos);
  CHECK_INT(h.done, 0);
  char *out = obelus_run_output(run);
  CHECK_STR(out, "{}");
  free(out);
  obelus_run_free(run);
  uv_close((uv_handle_t *)&t, NULL);
  obelus_engine_free(e);
  uv_run(&loop, UV_RUN_NOWAIT);
  CHECK_INT(uv_loop_close(&loop), 0);
}

TEST(completing_a_handle_after_its_run_is_freed_is_harmless) {
  obelus_engine *e = engine(NULL);
  host h = {0};
  held = NULL;
  obelus_run *run = start(e, PLAN, &h);
  obelus_call *first = held;
  obelus_run_free(run);
  CHECK_INT(obelus_call_complete(first, "{\"late\":true}"), OBELUS_OK);
  /* and with the engine gone too */
  host h2 = {0};
  start(e, PLAN, &h2);
  obelus_call *second = held;
  obelus_engine_free(e); /* frees the run with it */
  CHECK_STR(obelus_call_tool(second), "hang");
  obelus_call_fail(second, "too late");
  CHECK_INT(h.done + h2.done, 0);
}

TEST(cancel_from_an_event_callback) {
  obelus_engine *e = engine(NULL);
  host h = {.cancel_on = "a"};
  obelus_run *run = start(e,
                          "[{\"_id\":\"a\",\"_tool\":\"sleepy\",\"ms\":1,\"_outputPath\":\"a\"},"
                          " {\"_id\":\"b\",\"_tool\":\"sleepy\",\"ms\":5,\"x\":\"" DAGGER "state.a\","
                          "  \"_outputPath\":\"b\"},"
                          " {\"_id\":\"c\",\"_tool\":\"sleepy\",\"ms\":0,\"x\":\"" DAGGER "state.b\","
                          "  \"_outputPath\":\"c\"}]",
                          &h);
  CHECK_INT(obelus_run_wait(run), OBELUS_ECANCELED);
  uv_run(obelus_engine_loop(e), UV_RUN_DEFAULT); /* whatever is left: nothing of the run */
  CHECK(h.cancelled);
  CHECK_INT(h.events_after_cancel, 0);
  CHECK_INT(h.done, 0);
  char *v = NULL;
  CHECK_INT(obelus_run_resolve(run, DAGGER "state.a", NULL, OBELUS_NOW, &v), OBELUS_OK);
  CHECK_STR(v, "1");
  free(v);
  CHECK_INT(obelus_run_resolve(run, DAGGER "state.b", NULL, OBELUS_NOW, &v), OBELUS_ENOENT);
  CHECK_INT(obelus_run_resolve(run, DAGGER "state.c", NULL, OBELUS_NOW, &v), OBELUS_ENOENT);
  obelus_run_free(run);
  obelus_engine_free(e);
}

TEST(a_run_freed_from_its_completion_callback) {
  obelus_engine *e = engine(NULL);
  host h = {.free_in_done = 1};
  obelus_run *run = start(e, "[{\"_tool\":\"sleepy\",\"ms\":2,\"_outputPath\":\"a\"},"
                             " {\"_tool\":\"sleepy\",\"ms\":1,\"_outputPath\":\"b\"}]",
                          &h);
  /* wait sees the completion delivered, and the run freed in it */
  CHECK_INT(obelus_run_wait(run), 0);
  CHECK_INT(h.done, 1);
  CHECK(h.run == NULL);
  obelus_engine_free(e);
}

static obelus_run *to_free;
static int freeing_calls;
static void free_my_run(obelus_call *call, const char *params, void *data) {
  (void)params, (void)data;
  freeing_calls++;
  obelus_run_free(to_free); /* deferred: the scheduler is on the stack */
  CHECK_INT(obelus_call_complete(call, "true"), OBELUS_OK);
}

TEST(a_run_freed_from_inside_a_c_tool) {
  obelus_engine *e = engine(NULL);
  CHECK_INT(obelus_engine_add_tool(e, "free_my_run", NULL, free_my_run, NULL), OBELUS_OK);
  host h = {0};
  obelus_run_options opt = {0};
  opt.on_event = on_event;
  opt.on_done = on_done;
  opt.data = &h;
  CHECK_INT(obelus_run_new(e, &to_free,
                           "[{\"_tool\":\"sleepy\",\"ms\":2,\"_outputPath\":\"a\"},"
                           " {\"_tool\":\"free_my_run\",\"x\":\"" DAGGER "state.a\",\"_outputPath\":\"b\"},"
                           " {\"_tool\":\"free_my_run\",\"x\":\"" DAGGER "state.b\",\"_outputPath\":\"c\"}]",
                           &opt),
            OBELUS_OK);
  CHECK_INT(obelus_run_start(to_free), OBELUS_OK);
  freeing_calls = 0;
  uv_run(obelus_engine_loop(e), UV_RUN_DEFAULT);
  CHECK_INT(freeing_calls, 1); /* the follower never started */
  CHECK_INT(h.done, 0);
  obelus_engine_free(e);
}

static void cancel_wait_timer(uv_timer_t *t) {
  obelus_run_cancel(t->data);
  uv_close((uv_handle_t *)t, NULL);
}

TEST(wait_returns_when_a_callback_cancels_the_run) {
  obelus_engine *e = engine(NULL);
  host h = {0};
  held = NULL;
  obelus_run *run = start(e, PLAN, &h);
  uv_timer_t t;
  uv_timer_init(obelus_engine_loop(e), &t);
  t.data = run;
  uv_timer_start(&t, cancel_wait_timer, 5, 0);
  CHECK_INT(obelus_run_wait(run), OBELUS_ECANCELED);
  CHECK_INT(obelus_call_complete(held, "2"), OBELUS_OK);
  uv_run(obelus_engine_loop(e), UV_RUN_NOWAIT); /* the timer's close */
  obelus_run_free(run);
  obelus_engine_free(e);
}

/* 1,000 calls that sleep: a burst, during which the collector holds off and leaves
 * work for the loop's idle time (its own timer). Cancelled, then the engine freed on the
 * host's loop: every handle of the engine's is closed (the loop closes), nothing leaks. */
TEST(a_burst_of_sleepers_cancelled_and_the_engine_freed_on_a_host_loop) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  obelus_engine *e = engine(&loop);
  size_t cap = 1000 * 96 + 8, len = 0;
  char *plan = malloc(cap);
  len += (size_t)snprintf(plan + len, cap - len, "[");
  for (int i = 0; i < 1000; i++)
    len += (size_t)snprintf(plan + len, cap - len,
                            "%s{\"_tool\":\"sleepy\",\"ms\":200,\"_outputPath\":\"" DAGGER
                            "state.n%d\"}",
                            i ? "," : "", i);
  snprintf(plan + len, cap - len, "]");
  host h = {0};
  obelus_run *run = start(e, plan, &h);
  free(plan);
  uv_timer_t t;
  uv_timer_init(&loop, &t);
  t.data = &h;
  uv_timer_start(&t, cancel_timer, 30, 0); /* the idle time in between: the collector works */
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK(h.cancelled);
  CHECK_INT(h.done, 0);
  CHECK_INT(obelus_run_status(run), OBELUS_ECANCELED);
  obelus_run_free(run);
  uv_close((uv_handle_t *)&t, NULL);
  obelus_engine_free(e);
  uv_run(&loop, UV_RUN_NOWAIT);
  CHECK_INT(uv_loop_close(&loop), 0);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/obelus-api-cancel-XXXXXX");
  if (!mkdtemp(dir))
    return 1;
  snprintf(tool_file, sizeof tool_file, "%s/sleepy.lua", dir);
  FILE *f = fopen(tool_file, "w");
  fputs("local obelus = require 'obelus'\n"
        "return { name = 'sleepy', run = function(c) obelus.sleep(c.ms); return c.ms end }\n",
        f);
  fclose(f);
  RUN(cancel_from_a_timer_stops_the_run_and_late_completion_is_harmless);
  RUN(completing_a_handle_after_its_run_is_freed_is_harmless);
  RUN(cancel_from_an_event_callback);
  RUN(a_run_freed_from_its_completion_callback);
  RUN(a_run_freed_from_inside_a_c_tool);
  RUN(wait_returns_when_a_callback_cancels_the_run);
  RUN(a_burst_of_sleepers_cancelled_and_the_engine_freed_on_a_host_loop);
  unlink(tool_file);
  rmdir(dir);
  return TEST_END();
}
