/* test_api_resolve.c -- reading a run through the public API: a reference expression
 * now and as of position N (time travel), in an instance's view, absent, malformed (with
 * its character position), and the run's messages as JSON text. */
#include "obelus.h"
#include "test.h"

#define DAGGER "\xE2\x80\xA0"

static void set(obelus_call *call, const char *params, void *data) {
  (void)data;
  const char *v = strstr(params, "\"v\":");
  char out[64];
  snprintf(out, sizeof out, "%.*s", (int)strcspn(v + 4, ",}"), v + 4);
  obelus_call_complete(call, out);
}

/* Two writes to one path and one beside it, in plan order (concurrency 1, each
 * completing at once): the log holds every version. */
static const char *PLAN =
    "{\"context\":[{\"type\":\"state\",\"_instance\":\"X\",\"data\":{\"x\":2}},"
    "             {\"type\":\"state\",\"data\":{\"g\":1,\"v\":0}}],"
    " \"plan\":["
    "  {\"_id\":\"one\",\"_tool\":\"set\",\"v\":1,\"_outputPath\":\"" DAGGER "state.v\"},"
    "  {\"_id\":\"two\",\"_tool\":\"set\",\"v\":2,\"_outputPath\":\"" DAGGER "state.w\"},"
    "  {\"_id\":\"three\",\"_tool\":\"set\",\"v\":3,\"_outputPath\":\"" DAGGER "state.v\"}"
    " ]}";

static obelus_run *run_plan(obelus_engine *e, int time_travel) {
  obelus_run_options opt = {0};
  opt.time_travel = time_travel;
  opt.concurrency = 1;
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run, PLAN, &opt), OBELUS_OK);
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  CHECK_INT(obelus_run_wait(run), 0);
  return run;
}

/* The value as text, or the code's name when there is none. */
static const char *read_at(obelus_run *run, const char *expr, const char *inst, size_t at) {
  static char buf[256];
  char *v = NULL;
  int rc = obelus_run_resolve(run, expr, inst, at, &v);
  snprintf(buf, sizeof buf, "%s", rc == OBELUS_OK ? v : obelus_strerror(rc));
  CHECK(rc == OBELUS_OK ? v != NULL : v == NULL);
  free(v);
  return buf;
}

TEST(resolve_now_and_as_of_each_position) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "set", NULL, set, NULL), OBELUS_OK);
  obelus_run *run = run_plan(e, 1);
  /* 0 plan, 1 X's context, 2 the global context, 3 one, 4 two, 5 three (the
   * instance's message comes first: merged at the root, an instance's write
   * keeps the view it was computed from, which would shadow later global writes) */
  CHECK_INT(obelus_run_position(run), 6);
  char *m = obelus_run_message(run, 0);
  CHECK(m && !strncmp(m, "{\"type\":\"plan\",\"file\":\"plan\",", 29));
  free(m);
  m = obelus_run_message(run, 3);
  CHECK(m && strstr(m, "\"_path\":\"v\"") && strstr(m, "\"data\":{\"v\":1}"));
  free(m);
  CHECK(obelus_run_message(run, 6) == NULL);

  CHECK_STR(read_at(run, DAGGER "state.v", NULL, OBELUS_NOW), "3");
  CHECK_STR(read_at(run, DAGGER "state.v", NULL, 6), "3");   /* the whole log */
  CHECK_STR(read_at(run, DAGGER "state.v", NULL, 1000), "3"); /* beyond: as it is */
  CHECK_STR(read_at(run, DAGGER "state.v", NULL, 5), "1");
  CHECK_STR(read_at(run, DAGGER "state.v", NULL, 3), "0");
  CHECK_STR(read_at(run, DAGGER "state.v", NULL, 2), "absent");
  CHECK_STR(read_at(run, DAGGER "state.w", NULL, 4), "absent");
  CHECK_STR(read_at(run, DAGGER "state.w", NULL, 5), "2");
  CHECK_STR(read_at(run, DAGGER "state", NULL, OBELUS_NOW), "{\"g\":1,\"v\":3,\"w\":2}");
  /* expressions: the first present alternative; && is worth its last */
  CHECK_STR(read_at(run, DAGGER "state.nope || " DAGGER "state.w", NULL, OBELUS_NOW), "2");
  CHECK_STR(read_at(run, DAGGER "state.g && " DAGGER "state.v", NULL, 4), "1");
  CHECK_STR(read_at(run, DAGGER "state.nope && " DAGGER "state.v", NULL, OBELUS_NOW), "absent");
  CHECK_STR(obelus_engine_errmsg(e), "absent: nothing at " DAGGER "state.nope && " DAGGER "state.v");
  /* an instance reads its view: the global document merged with its own */
  CHECK_STR(read_at(run, DAGGER "state", "X", OBELUS_NOW), "{\"g\":1,\"v\":3,\"w\":2,\"x\":2}");
  CHECK_STR(read_at(run, DAGGER "state.x", NULL, OBELUS_NOW), "absent");
  CHECK_STR(read_at(run, DAGGER "state.x", "X", 1), "absent");
  CHECK_STR(read_at(run, DAGGER "state.x", "X", 2), "2");
  CHECK_STR(read_at(run, DAGGER "state.v", "X", 2), "absent");
  CHECK_STR(read_at(run, DAGGER "state.v", "X", 4), "1");
  obelus_run_free(run);
  obelus_engine_free(e);
}

TEST(malformed_expressions_name_the_character) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "set", NULL, set, NULL), OBELUS_OK);
  obelus_run *run = run_plan(e, 1);
  char *v = (char *)"untouched";
  CHECK_INT(obelus_run_resolve(run, DAGGER "state.v..x", NULL, OBELUS_NOW, &v), OBELUS_ESYNTAX);
  CHECK(v == NULL);
  CHECK(strstr(obelus_engine_errmsg(e), "empty path segment at character 9") != NULL);
  CHECK_INT(obelus_run_resolve(run, "state.v", NULL, OBELUS_NOW, &v), OBELUS_ESYNTAX);
  CHECK(strstr(obelus_engine_errmsg(e), "at character 0") != NULL);
  CHECK_INT(obelus_run_resolve(run, NULL, NULL, OBELUS_NOW, &v), OBELUS_EINVAL);
  /* a success clears the message */
  CHECK_STR(read_at(run, DAGGER "state.v", NULL, OBELUS_NOW), "3");
  CHECK_STR(obelus_engine_errmsg(e), "");
  obelus_run_free(run);
  obelus_engine_free(e);
}

TEST(earlier_positions_need_time_travel) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "set", NULL, set, NULL), OBELUS_OK);
  obelus_run *run = run_plan(e, 0);
  CHECK_STR(read_at(run, DAGGER "state.v", NULL, OBELUS_NOW), "3");
  CHECK_STR(read_at(run, DAGGER "state.v", NULL, 6), "3");
  CHECK_STR(read_at(run, DAGGER "state.v", NULL, 3), "invalid argument");
  CHECK(strstr(obelus_engine_errmsg(e), "time_travel") != NULL);
  obelus_run_free(run);
  obelus_engine_free(e);
}

int main(void) {
  RUN(resolve_now_and_as_of_each_position);
  RUN(malformed_expressions_name_the_character);
  RUN(earlier_positions_need_time_travel);
  return TEST_END();
}
