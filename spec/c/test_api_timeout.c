/* test_api_timeout.c -- _timeout and _retry for C tools through the public API: an
 * attempt that never completes times out ("timeout after N ms"); the handle of an
 * attempt that timed out is spent, so completing it late changes nothing, even while
 * a later attempt of the same call runs; a C tool's error is retried. */
#include "obelus.h"
#include "test.h"

/* The handles the "hold" tool never completes by itself, per attempt. */
static obelus_call *held[8];
static int nheld, hold_calls;

/* Attempt 1 hangs (its handle is kept); attempt 2 completes once a timer fires. */
typedef struct later {
  uv_timer_t timer;
  obelus_call *call;
} later;

static void later_closed(uv_handle_t *h) { free(h); }

static void later_fire(uv_timer_t *t) {
  later *l = (later *)t;
  CHECK_INT(obelus_call_complete(l->call, "\"attempt two\""), OBELUS_OK);
  uv_close((uv_handle_t *)t, later_closed);
}

static void hold(obelus_call *call, const char *params, void *data) {
  (void)params;
  if (hold_calls++ == 0 || !data) {
    held[nheld++] = call;
    return;
  }
  later *l = malloc(sizeof *l);
  l->call = call;
  uv_timer_init((uv_loop_t *)data, &l->timer);
  uv_timer_start(&l->timer, later_fire, 5, 0);
}

static int flaky_calls;
static void flaky(obelus_call *call, const char *params, void *data) {
  (void)params, (void)data;
  if (++flaky_calls < 3)
    obelus_call_fail(call, "not yet");
  else
    obelus_call_complete(call, "\"third time\"");
}

typedef struct result {
  int done, status;
  char output[256];
} result;

static void on_done(obelus_run *run, int status, const char *output, void *data) {
  (void)run;
  result *r = data;
  r->done = 1;
  r->status = status;
  snprintf(r->output, sizeof r->output, "%s", output ? output : "(null)");
}

static void run_plan(obelus_engine *e, const char *plan, result *r) {
  obelus_run_options opt = {0};
  opt.on_done = on_done;
  opt.data = r;
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run, plan, &opt), OBELUS_OK);
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  obelus_run_wait(run);
  obelus_run_free(run);
}

#define D "\xE2\x80\xA0"

TEST(a_c_tool_that_never_completes_times_out_and_its_late_completion_is_ignored) {
  uv_loop_t *loop = uv_default_loop();
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, loop), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "hold", NULL, hold, NULL), OBELUS_OK);
  result r = {0};
  nheld = hold_calls = 0;
  run_plan(e, "{\"plan\":[{\"_id\":\"h\",\"_tool\":\"hold\",\"_timeout\":20,"
              "\"_outputPath\":\"" D "state.x || " D "state.err\"}],"
              "\"output\":\"" D "state.err\"}", &r);
  CHECK_INT(r.done, 1);
  CHECK_INT(r.status, 0); /* handled by the || alternative */
  CHECK_STR(r.output, "{\"error\":\"timeout after 20 ms\",\"tool\":\"hold\",\"call\":\"h\"}");
  CHECK_INT(nheld, 1);
  /* the host completes the spent handle late: accepted, and nothing happens */
  CHECK_INT(obelus_call_complete(held[0], "\"too late\""), OBELUS_OK);
  obelus_engine_free(e);
}

TEST(a_late_completion_of_a_timed_out_attempt_does_not_complete_the_next_one) {
  uv_loop_t *loop = uv_default_loop();
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, loop), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "hold", NULL, hold, loop), OBELUS_OK);
  result r = {0};
  nheld = hold_calls = 0;
  obelus_run_options opt = {0};
  opt.on_done = on_done;
  opt.data = &r;
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run,
                           "{\"plan\":[{\"_id\":\"h\",\"_tool\":\"hold\",\"_timeout\":20,"
                           "\"_retry\":{\"attempts\":2,\"delay_ms\":0},"
                           "\"_outputPath\":\"" D "state.x\"}],\"output\":\"" D "state.x\"}",
                           &opt),
            OBELUS_OK);
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  /* turn the loop until attempt 2 has started, then complete attempt 1's handle */
  while (hold_calls < 2 && uv_run(loop, UV_RUN_ONCE))
    ;
  CHECK_INT(hold_calls, 2);
  CHECK_INT(nheld, 1);
  CHECK_INT(obelus_call_complete(held[0], "\"attempt one, late\""), OBELUS_OK);
  obelus_run_wait(run);
  CHECK_INT(r.status, 0);
  CHECK_STR(r.output, "\"attempt two\"");
  obelus_run_free(run);
  obelus_engine_free(e);
}

TEST(a_c_tools_error_is_retried) {
  uv_loop_t *loop = uv_default_loop();
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, loop), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "flaky", NULL, flaky, NULL), OBELUS_OK);
  result r = {0};
  flaky_calls = 0;
  run_plan(e, "{\"plan\":[{\"_tool\":\"flaky\",\"_retry\":{\"attempts\":3,\"delay_ms\":1},"
              "\"_outputPath\":\"" D "state.x\"}],\"output\":\"" D "state.x\"}", &r);
  CHECK_INT(flaky_calls, 3);
  CHECK_INT(r.status, 0);
  CHECK_STR(r.output, "\"third time\"");
  obelus_engine_free(e);
}

TEST(call_timeout_ms_gives_every_call_a_timeout_and_max_calls_counts_calls) {
  uv_loop_t *loop = uv_default_loop();
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, loop), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "hold", NULL, hold, NULL), OBELUS_OK);
  result r = {0};
  nheld = hold_calls = 0;
  obelus_run_options opt = {0};
  opt.on_done = on_done;
  opt.data = &r;
  opt.call_timeout_ms = 15;
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run,
                           "{\"plan\":[{\"_id\":\"h\",\"_tool\":\"hold\","
                           "\"_outputPath\":\"" D "state.x || " D "state.err\"}],"
                           "\"output\":\"" D "state.err.error\"}",
                           &opt),
            OBELUS_OK);
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  obelus_run_wait(run);
  CHECK_STR(r.output, "\"timeout after 15 ms\"");
  obelus_run_free(run);
  CHECK_INT(obelus_call_complete(held[0], NULL), OBELUS_OK); /* spent: releases it */
  /* two calls, at most one */
  opt.call_timeout_ms = 0;
  opt.max_calls = 1;
  CHECK_INT(obelus_run_new(e, &run, "[{\"_tool\":\"hold\"},{\"_tool\":\"hold\"}]", &opt),
            OBELUS_EINVAL);
  CHECK(strstr(obelus_engine_errmsg(e), "more than --max-calls 1") != NULL);
  obelus_engine_free(e);
}

int main(void) {
  RUN(a_c_tool_that_never_completes_times_out_and_its_late_completion_is_ignored);
  RUN(a_late_completion_of_a_timed_out_attempt_does_not_complete_the_next_one);
  RUN(a_c_tools_error_is_retried);
  RUN(call_timeout_ms_gives_every_call_a_timeout_and_max_calls_counts_calls);
  return TEST_END();
}
