/* test_api_errors.c -- what goes wrong reaches the host as a negative code and a message
 * naming the problem: an invalid plan (every problem listed, nothing run), malformed plan
 * JSON, an unknown tool, schema text that is not JSON or not a usable schema, bad tool
 * files, bad input, a C tool's result that is not JSON; obelus_strerror names each code. */
#include <unistd.h>

#include "obelus.h"
#include "test.h"

#define DAGGER "\xE2\x80\xA0"

static int count_calls;
static void count(obelus_call *call, const char *params, void *data) {
  (void)params, (void)data;
  count_calls++;
  obelus_call_complete(call, NULL);
}

static void not_json(obelus_call *call, const char *params, void *data) {
  (void)params, (void)data;
  CHECK_INT(obelus_call_complete(call, "{\"a\":"), OBELUS_EJSON);
}

static obelus_engine *engine(void) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "count", NULL, count, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "needs_x", "{\"required\":[\"x\"]}", count, NULL),
            OBELUS_OK);
  return e;
}

static int has(const char *s, const char *part) {
  if (s && strstr(s, part))
    return 1;
  fprintf(stderr, "  \"%s\" lacks \"%s\"\n", s ? s : "(null)", part);
  return 0;
}

TEST(an_invalid_plan_lists_every_problem_and_runs_nothing) {
  obelus_engine *e = engine();
  const char *plan =
      "[{\"_id\":\"ok\",\"_tool\":\"count\",\"_outputPath\":\"a\"},"
      " {\"_id\":\"u\",\"_tool\":\"nosuch\",\"_outputPath\":\"b\"},"
      " {\"_id\":\"m\",\"_tool\":\"count\",\"_outputMethod\":\"smash\",\"_outputPath\":\"c\"},"
      " {\"_id\":\"r\",\"_tool\":\"count\",\"x\":\"" DAGGER "state..x\",\"_outputPath\":\"d\"},"
      " {\"_id\":\"q\",\"_tool\":\"needs_x\",\"_outputPath\":\"e\"},"
      " {\"_id\":\"z\",\"_tool\":\"count\",\"_bogus\":1,\"_outputPath\":\"f\"},"
      " {\"_id\":\"p1\",\"_tool\":\"count\",\"y\":\"" DAGGER "state.p2\",\"_outputPath\":\"p1\"},"
      " {\"_id\":\"p2\",\"_tool\":\"count\",\"y\":\"" DAGGER "state.p1\",\"_outputPath\":\"p2\"}]";
  obelus_run_options opt = {0};
  opt.name = "mine.json";
  obelus_run *run = (obelus_run *)&opt; /* must be reset to NULL */
  count_calls = 0;
  CHECK_INT(obelus_run_new(e, &run, plan, &opt), OBELUS_EINVAL);
  CHECK(run == NULL);
  CHECK_INT(count_calls, 0);
  size_t n = obelus_engine_nproblems(e);
  CHECK_INT(n, 6);
  const char *want[] = {"mine.json: call u (nosuch): ", "mine.json: call m (count): ",
                        "call r (count): ", "call q (needs_x): ", "call z (count): ", "p1"};
  const char *what[] = {"nosuch", "_outputMethod", "empty path segment", "x", "_bogus", "cycle"};
  for (size_t w = 0; w < 6; w++) { /* each problem once, whatever the order */
    int found = 0;
    for (size_t i = 0; i < n; i++) {
      const char *p = obelus_engine_problem(e, i);
      found += strstr(p, want[w]) && strstr(p, what[w]);
    }
    CHECK_INT(found, 1);
  }
  for (size_t i = 0; i < n; i++)
    CHECK(has(obelus_engine_errmsg(e), obelus_engine_problem(e, i)));
  CHECK(obelus_engine_problem(e, n) == NULL);
  size_t lines = 1;
  for (const char *s = obelus_engine_errmsg(e); *s; s++)
    lines += *s == '\n';
  CHECK_INT(lines, n); /* one a line */
  /* the next call that succeeds clears them */
  CHECK_INT(obelus_run_new(e, &run, "[]", NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_nproblems(e), 0);
  CHECK_STR(obelus_engine_errmsg(e), "");
  obelus_run_free(run);
  obelus_engine_free(e);
}

TEST(bad_plans_and_inputs_give_their_codes) {
  obelus_engine *e = engine();
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run, "[{\"_tool\":", NULL), OBELUS_EJSON);
  CHECK(has(obelus_engine_errmsg(e), "plan: the plan is not JSON: line 1"));
  CHECK_INT(obelus_engine_nproblems(e), 0);
  CHECK_INT(obelus_run_new(e, &run, "[{\"_tool\":\"ghost\",\"_outputPath\":\"a\"}]", NULL),
            OBELUS_EINVAL);
  CHECK(has(obelus_engine_errmsg(e), "ghost"));
  CHECK_INT(obelus_engine_nproblems(e), 1);
  CHECK_INT(obelus_run_new(e, &run, "{\"plan\":[],\"extra\":1}", NULL), OBELUS_EINVAL);
  CHECK(has(obelus_engine_errmsg(e), "extra"));
  CHECK_INT(obelus_run_new(e, &run, "{\"context\":[{\"type\":\"data\",\"kind\":7}],\"plan\":[]}",
                           NULL),
            OBELUS_EINVAL);
  CHECK(has(obelus_engine_errmsg(e), "context[0]"));
  obelus_run_options opt = {0};
  opt.input = "{oops";
  CHECK_INT(obelus_run_new(e, &run, "[]", &opt), OBELUS_EJSON);
  CHECK(has(obelus_engine_errmsg(e), "input is not JSON"));
  CHECK_INT(obelus_run_new(e, &run, NULL, NULL), OBELUS_EINVAL);
  CHECK_INT(obelus_run_new_file(e, &run, "/nonexistent/plan.json", NULL), OBELUS_EIO);
  CHECK(has(obelus_engine_errmsg(e), "/nonexistent/plan.json"));
  CHECK(run == NULL);
  /* a run started twice */
  CHECK_INT(obelus_run_new(e, &run, "[]", NULL), OBELUS_OK);
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  CHECK_INT(obelus_run_start(run), OBELUS_EINVAL);
  CHECK(has(obelus_engine_errmsg(e), "started already"));
  obelus_run_free(run);
  obelus_engine_free(e);
}

TEST(bad_tools_give_their_codes) {
  obelus_engine *e = engine();
  CHECK_INT(obelus_engine_add_tool(e, "t1", "{not json", count, NULL), OBELUS_EJSON);
  CHECK(has(obelus_engine_errmsg(e), "C tool \"t1\": the schema is not JSON: line 1"));
  CHECK_INT(obelus_engine_add_tool(e, "t2", "{\"type\":12}", count, NULL), OBELUS_EINVAL);
  CHECK(has(obelus_engine_errmsg(e), "C tool \"t2\""));
  CHECK_INT(obelus_engine_add_tool(e, "count", NULL, count, NULL), OBELUS_EINVAL);
  CHECK(has(obelus_engine_errmsg(e), "already defined"));
  CHECK_INT(obelus_engine_add_tool(e, "", NULL, count, NULL), OBELUS_EINVAL);
  CHECK_INT(obelus_engine_add_tool(e, "t3", NULL, NULL, NULL), OBELUS_EINVAL);
  /* a failed registration leaves no tool behind */
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run, "[{\"_tool\":\"t1\",\"_outputPath\":\"a\"}]", NULL),
            OBELUS_EINVAL);

  char dir[] = "/tmp/obelus-api-errors-XXXXXX", path[96];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/broken.lua", dir);
  FILE *f = fopen(path, "w");
  fputs("return { name = 'broken', run = function( }\n", f);
  fclose(f);
  CHECK(obelus_engine_load_tools(e, path) < 0);
  CHECK(has(obelus_engine_errmsg(e), "broken.lua"));
  CHECK(obelus_engine_load_tools(e, "/nonexistent/tools") < 0);
  CHECK(has(obelus_engine_errmsg(e), "/nonexistent/tools"));
  CHECK(obelus_engine_load_script(e, path) < 0);
  CHECK(has(obelus_engine_errmsg(e), "broken.lua"));
  unlink(path);
  rmdir(dir);
  obelus_engine_free(e);
}

TEST(a_c_result_that_is_not_json_fails_the_call) {
  obelus_engine *e = engine();
  CHECK_INT(obelus_engine_add_tool(e, "not_json", NULL, not_json, NULL), OBELUS_OK);
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run, "[{\"_id\":\"nj\",\"_tool\":\"not_json\",\"_outputPath\":\"a\"}]",
                           NULL),
            OBELUS_OK);
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  CHECK_INT(obelus_run_wait(run), 1);
  char *v = NULL;
  CHECK_INT(obelus_run_resolve(run, DAGGER "error.error", NULL, OBELUS_NOW, &v), OBELUS_OK);
  CHECK(has(v, "the tool's result is not JSON: line 1"));
  free(v);
  obelus_run_free(run);
  obelus_engine_free(e);
}

/* a journal FILE* that is the plan file (opened under another name: a link) is refused
 * before the plan is read, and the plan keeps its bytes */
TEST(a_journal_that_is_the_plan_file_is_refused) {
  obelus_engine *e = engine();
  char dir[] = "/tmp/obelus_api_XXXXXX", plan[64], link[80];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(plan, sizeof plan, "%s/p.json", dir);
  snprintf(link, sizeof link, "%s/j.jsonl", dir);
  const char *text = "[{\"_tool\":\"t\",\"_outputPath\":\"x\"}]";
  FILE *f = fopen(plan, "w");
  fputs(text, f);
  fclose(f);
  CHECK(symlink(plan, link) == 0);
  FILE *j = fopen(link, "a");
  obelus_run_options opt = {0};
  opt.journal = j;
  obelus_run *run = NULL;
  CHECK_INT(obelus_run_new_file(e, &run, plan, &opt), OBELUS_EINVAL);
  CHECK(has(obelus_engine_errmsg(e), "the journal is the plan file"));
  CHECK(run == NULL);
  fclose(j);
  char buf[128] = {0};
  f = fopen(plan, "r");
  CHECK(fread(buf, 1, sizeof buf - 1, f) == strlen(text));
  fclose(f);
  CHECK(strcmp(buf, text) == 0);
  unlink(link);
  unlink(plan);
  rmdir(dir);
  obelus_engine_free(e);
}

TEST(every_code_has_a_name) {
  CHECK_STR(obelus_strerror(OBELUS_OK), "success");
  CHECK_STR(obelus_strerror(OBELUS_EJSON), "malformed JSON");
  CHECK_STR(obelus_strerror(OBELUS_ESYNTAX), "malformed reference or path");
  CHECK_STR(obelus_strerror(OBELUS_ENOENT), "absent");
  CHECK_STR(obelus_strerror(OBELUS_EBUSY), "not possible now");
  CHECK_STR(obelus_strerror(OBELUS_ECANCELED), "cancelled");
  CHECK_STR(obelus_strerror(-999), "unknown error");
  CHECK_STR(obelus_version(), "0.1.0");
  CHECK_INT(obelus_engine_new(NULL, NULL), OBELUS_EINVAL);
  CHECK_STR(obelus_engine_errmsg(NULL), "");
}

int main(void) {
  RUN(an_invalid_plan_lists_every_problem_and_runs_nothing);
  RUN(bad_plans_and_inputs_give_their_codes);
  RUN(bad_tools_give_their_codes);
  RUN(a_c_result_that_is_not_json_fails_the_call);
  RUN(a_journal_that_is_the_plan_file_is_refused);
  RUN(every_code_has_a_name);
  return TEST_END();
}
