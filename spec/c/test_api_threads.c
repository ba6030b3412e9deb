/* test_api_threads.c -- a host asks for a run on threads (obelus_run_options.threads):
 * the output and the journal are one engine's; every thread's engine loads the
 * host's tool files again (their globals count per engine); events arrive on the
 * host's loop; a run cancelled mid-way ends with every thread joined; an engine with
 * a C tool runs on one engine. Run under ASan and TSan by `make test`. */
#include <unistd.h>

#include "obelus.h"
#include "test.h"

#define D "\xE2\x80\xA0"

static char dir[64], tools[128];

static void write_tools(void) {
  snprintf(dir, sizeof dir, "/tmp/obelus-threads-XXXXXX");
  if (!mkdtemp(dir))
    abort();
  snprintf(tools, sizeof tools, "%s/t.lua", dir);
  FILE *f = fopen(tools, "w");
  fputs("local obelus = require 'obelus'\n"
        "local n = 0\n"
        "return {\n"
        "  { name = 'count', run = function(call) n = n + 1; return n end },\n"
        "  { name = 'twice', run = function(call) obelus.sleep(call.ms or 0); return call.x * 2 end },\n"
        "}\n",
        f);
  fclose(f);
}

/* {"instances":["i1".."iN"],"plan":[...]} */
static char *plan_of(int n, const char *calls) {
  size_t cap = 64 + (size_t)n * 12 + strlen(calls);
  char *p = malloc(cap);
  size_t len = (size_t)snprintf(p, cap, "{\"instances\":[");
  for (int i = 1; i <= n; i++)
    len += (size_t)snprintf(p + len, cap - len, "%s\"i%d\"", i > 1 ? "," : "", i);
  snprintf(p + len, cap - len, "],\"plan\":[%s]}", calls);
  return p;
}

typedef struct seen {
  int events, done, status;
  char *output;
} seen;

static void on_event(obelus_run *run, const obelus_event *ev, void *data) {
  seen *s = data;
  s->events++;
}

static void on_done(obelus_run *run, int status, const char *output, void *data) {
  seen *s = data;
  s->done++;
  s->status = status;
  s->output = strdup(output);
}

/* An engine with the test's tool file loaded. */
static obelus_engine *engine_with_tools(void) {
  obelus_engine *e = NULL;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_load_tools(e, tools), OBELUS_OK);
  return e;
}

/* Runs plan with threads, waits; the output (malloc'd), status in *status. */
static char *run_plan(obelus_engine *e, const char *plan, size_t threads, int *status,
                      FILE *journal, seen *s) {
  obelus_run_options o = {.threads = threads, .journal = journal, .on_event = on_event,
                          .on_done = on_done, .data = s};
  obelus_run *r;
  if (obelus_run_new(e, &r, plan, &o) != OBELUS_OK) {
    fprintf(stderr, "%s\n", obelus_engine_errmsg(e));
    return NULL;
  }
  CHECK_INT(obelus_run_start(r), OBELUS_OK);
  *status = obelus_run_wait(r);
  char *out = obelus_run_output(r);
  obelus_run_free(r);
  return out;
}

TEST(threads_give_one_engines_output_and_journal) {
  obelus_engine *e = engine_with_tools();
  char *plan = plan_of(9, "{\"_id\":\"a\",\"_tool\":\"twice\",\"x\":1,\"ms\":5,\"_outputPath\":\"a\"},"
                          "{\"_id\":\"b\",\"_tool\":\"twice\",\"x\":\"" D "state.a\",\"_outputPath\":\"b\"}");
  seen s1 = {0}, s3 = {0};
  int st1, st3;
  FILE *j1 = tmpfile(), *j3 = tmpfile();
  char *one = run_plan(e, plan, 1, &st1, j1, &s1);
  char *three = run_plan(e, plan, 3, &st3, j3, &s3);
  CHECK_INT(st1, 0);
  CHECK_INT(st3, 0);
  CHECK(one && strstr(one, "\"i9\":{\"a\":2,\"b\":4}"));
  CHECK_STR(three, one);
  CHECK_STR(s3.output, one);
  CHECK_INT(s1.done, 1);
  CHECK_INT(s3.done, 1);
  CHECK_INT(s3.events, s1.events); /* ready, started, done for each of 18 calls, run_done once */
  CHECK(s1.events >= 3 * 18);
  /* the journals hold the same number of lines, and both end with the end record */
  long n1 = 0, n3 = 0;
  char line[4096], last1[4096] = "", last3[4096] = "";
  rewind(j1);
  while (fgets(line, sizeof line, j1))
    if (line[0] == '{') {
      n1++;
      memcpy(last1, line, sizeof line);
    }
  rewind(j3);
  while (fgets(line, sizeof line, j3))
    if (line[0] == '{') {
      n3++;
      memcpy(last3, line, sizeof line);
    }
  CHECK_INT(n3, n1);
  CHECK_STR(last3, "{\"journal\":\"end\",\"exit\":0}\n");
  CHECK_STR(last1, last3);
  fclose(j1);
  fclose(j3);
  free(one);
  free(three);
  free(s1.output);
  free(s3.output);
  free(plan);
  obelus_engine_free(e);
}

/* Each of 4 instances counts the calls its engine's Lua state has run, asked for on 4
 * threads: the output (malloc'd), the status in *status. */
static char *counts_of_four(obelus_engine *e, int *status) {
  char *plan = plan_of(4, "{\"_tool\":\"count\",\"_outputPath\":\"n\"}");
  seen s = {0};
  char *out = run_plan(e, plan, 4, status, NULL, &s);
  free(s.output);
  free(plan);
  return out;
}

TEST(each_thread_has_an_engine_of_its_own) {
  obelus_engine *e = engine_with_tools();
  int st;
  char *out = counts_of_four(e, &st);
  CHECK_INT(st, 0);
  CHECK_STR(out, "{\"i1\":{\"n\":1},\"i2\":{\"n\":1},\"i3\":{\"n\":1},\"i4\":{\"n\":1}}");
  free(out);
  obelus_engine_free(e);
}

static void nothing(obelus_call *call, const char *params, void *data) {
  obelus_call_complete(call, "7");
}

TEST(an_engine_with_a_c_tool_runs_on_one_engine) {
  obelus_engine *e = engine_with_tools();
  CHECK_INT(obelus_engine_add_tool(e, "seven", NULL, nothing, NULL), OBELUS_OK);
  int st;
  char *out = counts_of_four(e, &st);
  CHECK_STR(out, "{\"i1\":{\"n\":1},\"i2\":{\"n\":2},\"i3\":{\"n\":3},\"i4\":{\"n\":4}}");
  free(out);
  obelus_engine_free(e);
}

TEST(a_run_on_threads_cancelled_and_freed_leaves_nothing) {
  obelus_engine *e = engine_with_tools();
  char *plan = plan_of(6, "{\"_tool\":\"twice\",\"x\":1,\"ms\":10000,\"_outputPath\":\"n\"}");
  seen s = {0};
  obelus_run_options o = {.threads = 2, .on_done = on_done, .data = &s};
  obelus_run *r;
  CHECK_INT(obelus_run_new(e, &r, plan, &o), OBELUS_OK);
  CHECK_INT(obelus_run_start(r), OBELUS_OK);
  for (int i = 0; i < 20; i++)
    uv_run(obelus_engine_loop(e), UV_RUN_NOWAIT), usleep(5000);
  CHECK_INT(obelus_run_status(r), OBELUS_EBUSY);
  char *v = NULL;
  CHECK_INT(obelus_run_resolve(r, D "state.n", "i1", (size_t)-1, &v), OBELUS_EINVAL);
  obelus_run_cancel(r);
  CHECK_INT(obelus_run_status(r), OBELUS_ECANCELED);
  obelus_run_free(r);
  CHECK_INT(s.done, 0);
  free(plan);
  obelus_engine_free(e);
}

/* On threads the engine checks one copy of each call and each thread its own part;
 * a plan with problems is read whole again: every copy's problem is listed, as on one
 * engine, and max_calls counts the whole plan's calls. */
TEST(an_invalid_plan_on_threads_has_one_engines_problems) {
  obelus_engine *e = engine_with_tools();
  char *cycle = plan_of(3, "{\"_id\":\"a\",\"_tool\":\"twice\",\"x\":\"" D "state.b\",\"_outputPath\":\"a\"},"
                           "{\"_id\":\"b\",\"_tool\":\"twice\",\"x\":\"" D "state.a\",\"_outputPath\":\"b\"}");
  char *text[2] = {NULL, NULL};
  size_t n[2] = {0, 0};
  for (int k = 0; k < 2; k++) {
    obelus_run_options o = {.threads = k ? 2 : 1};
    obelus_run *r = NULL;
    CHECK_INT(obelus_run_new(e, &r, cycle, &o), OBELUS_EINVAL);
    n[k] = obelus_engine_nproblems(e);
    text[k] = strdup(obelus_engine_errmsg(e));
  }
  CHECK_INT(n[0], 3); /* a cycle in each copy */
  CHECK_INT(n[1], n[0]);
  CHECK_STR(text[1], text[0]);
  CHECK(strstr(text[1], "a@i3 (twice) -> b@i3") != NULL);
  char *three = plan_of(3, "{\"_tool\":\"count\",\"_outputPath\":\"n\"}");
  obelus_run_options lim = {.threads = 2, .max_calls = 2};
  obelus_run *r = NULL;
  CHECK_INT(obelus_run_new(e, &r, three, &lim), OBELUS_EINVAL);
  lim.max_calls = 3;
  CHECK_INT(obelus_run_new(e, &r, three, &lim), OBELUS_OK);
  CHECK_INT(obelus_run_start(r), OBELUS_OK);
  CHECK_INT(obelus_run_wait(r), 0);
  obelus_run_free(r);
  free(text[0]);
  free(text[1]);
  free(cycle);
  free(three);
  obelus_engine_free(e);
}

int main(void) {
  write_tools();
  RUN(threads_give_one_engines_output_and_journal);
  RUN(each_thread_has_an_engine_of_its_own);
  RUN(an_engine_with_a_c_tool_runs_on_one_engine);
  RUN(a_run_on_threads_cancelled_and_freed_leaves_nothing);
  RUN(an_invalid_plan_on_threads_has_one_engines_problems);
  unlink(tools);
  rmdir(dir);
  return TEST_END();
}
